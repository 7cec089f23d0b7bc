"""Kafka's numbering facts: API keys and error codes (from Apache Kafka's
protocol definitions), and the errors kcodec.protocol raises."""
from ..errors import KafkaFormatError

#: Kafka's API names by API key (all of Apache Kafka's, not only those
#: kcodec has schemas for: see :data:`REQUESTS`).
API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 4: "LeaderAndIsr",
    5: "StopReplica", 6: "UpdateMetadata", 7: "ControlledShutdown", 8: "OffsetCommit",
    9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup",
    14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups", 17: "SaslHandshake",
    18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics", 21: "DeleteRecords",
    22: "InitProducerId", 23: "OffsetForLeaderEpoch", 24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers", 28: "TxnOffsetCommit",
    29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls", 32: "DescribeConfigs",
    33: "AlterConfigs", 34: "AlterReplicaLogDirs", 35: "DescribeLogDirs", 36: "SaslAuthenticate",
    37: "CreatePartitions", 38: "CreateDelegationToken", 39: "RenewDelegationToken",
    40: "ExpireDelegationToken", 41: "DescribeDelegationToken", 42: "DeleteGroups",
    43: "ElectLeaders", 44: "IncrementalAlterConfigs", 45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments", 47: "OffsetDelete", 48: "DescribeClientQuotas",
    49: "AlterClientQuotas", 50: "DescribeUserScramCredentials", 51: "AlterUserScramCredentials",
    52: "Vote", 53: "BeginQuorumEpoch", 54: "EndQuorumEpoch", 55: "DescribeQuorum",
    56: "AlterPartition", 57: "UpdateFeatures", 58: "Envelope", 59: "FetchSnapshot",
    60: "DescribeCluster", 61: "DescribeProducers", 62: "BrokerRegistration",
    63: "BrokerHeartbeat", 64: "UnregisterBroker", 65: "DescribeTransactions",
    66: "ListTransactions", 67: "AllocateProducerIds", 68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe", 70: "ControllerRegistration", 71: "GetTelemetrySubscriptions",
    72: "PushTelemetry", 73: "AssignReplicasToDirs", 74: "ListConfigResources",
    75: "DescribeTopicPartitions", 76: "ShareGroupHeartbeat", 77: "ShareGroupDescribe",
    78: "ShareFetch", 79: "ShareAcknowledge", 80: "AddRaftVoter", 81: "RemoveRaftVoter",
    82: "UpdateRaftVoter", 83: "InitializeShareGroupState", 84: "ReadShareGroupState",
    85: "WriteShareGroupState", 86: "DeleteShareGroupState", 87: "ReadShareGroupStateSummary",
    88: "StreamsGroupHeartbeat", 89: "StreamsGroupDescribe", 90: "DescribeShareGroupOffsets",
    91: "AlterShareGroupOffsets", 92: "DeleteShareGroupOffsets",
}
#: API keys by name (``API_KEYS["Fetch"] == 1``).
API_KEYS = {name: key for key, name in API_NAMES.items()}

#: Kafka's error names by error code (``ERROR_NAMES[3] ==
#: "UNKNOWN_TOPIC_OR_PARTITION"``).
ERROR_NAMES = {
    -1: "UNKNOWN_SERVER_ERROR", 0: "NONE", 1: "OFFSET_OUT_OF_RANGE", 2: "CORRUPT_MESSAGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION", 4: "INVALID_FETCH_SIZE", 5: "LEADER_NOT_AVAILABLE",
    6: "NOT_LEADER_OR_FOLLOWER", 7: "REQUEST_TIMED_OUT", 8: "BROKER_NOT_AVAILABLE",
    9: "REPLICA_NOT_AVAILABLE", 10: "MESSAGE_TOO_LARGE", 11: "STALE_CONTROLLER_EPOCH",
    12: "OFFSET_METADATA_TOO_LARGE", 13: "NETWORK_EXCEPTION", 14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR", 17: "INVALID_TOPIC_EXCEPTION",
    18: "RECORD_LIST_TOO_LARGE", 19: "NOT_ENOUGH_REPLICAS",
    20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND", 21: "INVALID_REQUIRED_ACKS", 22: "ILLEGAL_GENERATION",
    23: "INCONSISTENT_GROUP_PROTOCOL", 24: "INVALID_GROUP_ID", 25: "UNKNOWN_MEMBER_ID",
    26: "INVALID_SESSION_TIMEOUT", 27: "REBALANCE_IN_PROGRESS", 28: "INVALID_COMMIT_OFFSET_SIZE",
    29: "TOPIC_AUTHORIZATION_FAILED", 30: "GROUP_AUTHORIZATION_FAILED",
    31: "CLUSTER_AUTHORIZATION_FAILED", 32: "INVALID_TIMESTAMP", 33: "UNSUPPORTED_SASL_MECHANISM",
    34: "ILLEGAL_SASL_STATE", 35: "UNSUPPORTED_VERSION", 36: "TOPIC_ALREADY_EXISTS",
    37: "INVALID_PARTITIONS", 38: "INVALID_REPLICATION_FACTOR", 39: "INVALID_REPLICA_ASSIGNMENT",
    40: "INVALID_CONFIG", 41: "NOT_CONTROLLER", 42: "INVALID_REQUEST",
    43: "UNSUPPORTED_FOR_MESSAGE_FORMAT", 44: "POLICY_VIOLATION",
    45: "OUT_OF_ORDER_SEQUENCE_NUMBER", 46: "DUPLICATE_SEQUENCE_NUMBER",
    47: "INVALID_PRODUCER_EPOCH", 48: "INVALID_TXN_STATE", 49: "INVALID_PRODUCER_ID_MAPPING",
    50: "INVALID_TRANSACTION_TIMEOUT", 51: "CONCURRENT_TRANSACTIONS",
    52: "TRANSACTION_COORDINATOR_FENCED", 53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    54: "SECURITY_DISABLED", 55: "OPERATION_NOT_ATTEMPTED", 56: "KAFKA_STORAGE_ERROR",
    57: "LOG_DIR_NOT_FOUND", 58: "SASL_AUTHENTICATION_FAILED", 59: "UNKNOWN_PRODUCER_ID",
    60: "REASSIGNMENT_IN_PROGRESS", 61: "DELEGATION_TOKEN_AUTH_DISABLED",
    62: "DELEGATION_TOKEN_NOT_FOUND", 63: "DELEGATION_TOKEN_OWNER_MISMATCH",
    64: "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", 65: "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
    66: "DELEGATION_TOKEN_EXPIRED", 67: "INVALID_PRINCIPAL_TYPE", 68: "NON_EMPTY_GROUP",
    69: "GROUP_ID_NOT_FOUND", 70: "FETCH_SESSION_ID_NOT_FOUND", 71: "INVALID_FETCH_SESSION_EPOCH",
    72: "LISTENER_NOT_FOUND", 73: "TOPIC_DELETION_DISABLED", 74: "FENCED_LEADER_EPOCH",
    75: "UNKNOWN_LEADER_EPOCH", 76: "UNSUPPORTED_COMPRESSION_TYPE", 77: "STALE_BROKER_EPOCH",
    78: "OFFSET_NOT_AVAILABLE", 79: "MEMBER_ID_REQUIRED", 80: "PREFERRED_LEADER_NOT_AVAILABLE",
    81: "GROUP_MAX_SIZE_REACHED", 82: "FENCED_INSTANCE_ID", 83: "ELIGIBLE_LEADERS_NOT_AVAILABLE",
    84: "ELECTION_NOT_NEEDED", 85: "NO_REASSIGNMENT_IN_PROGRESS", 86: "GROUP_SUBSCRIBED_TO_TOPIC",
    87: "INVALID_RECORD", 88: "UNSTABLE_OFFSET_COMMIT", 89: "THROTTLING_QUOTA_EXCEEDED",
    90: "PRODUCER_FENCED", 91: "RESOURCE_NOT_FOUND", 92: "DUPLICATE_RESOURCE",
    93: "UNACCEPTABLE_CREDENTIAL", 94: "INCONSISTENT_VOTER_SET", 95: "INVALID_UPDATE_VERSION",
    96: "FEATURE_UPDATE_FAILED", 97: "PRINCIPAL_DESERIALIZATION_FAILURE",
    98: "SNAPSHOT_NOT_FOUND", 100: "UNKNOWN_TOPIC_ID", 101: "DUPLICATE_BROKER_REGISTRATION",
    102: "BROKER_ID_NOT_REGISTERED", 103: "INCONSISTENT_TOPIC_ID", 104: "INCONSISTENT_CLUSTER_ID",
    105: "TRANSACTIONAL_ID_NOT_FOUND", 106: "FETCH_SESSION_TOPIC_ID_ERROR",
    107: "INELIGIBLE_REPLICA", 108: "NEW_LEADER_ELECTED", 109: "OFFSET_MOVED_TO_TIERED_STORAGE",
    110: "FENCED_MEMBER_EPOCH", 111: "UNRELEASED_INSTANCE_ID", 112: "UNSUPPORTED_ASSIGNOR",
    113: "STALE_MEMBER_EPOCH", 114: "MISMATCHED_ENDPOINT_TYPE", 115: "UNSUPPORTED_ENDPOINT_TYPE",
    116: "UNKNOWN_CONTROLLER_ID", 117: "UNKNOWN_SUBSCRIPTION_ID", 118: "TELEMETRY_TOO_LARGE",
    119: "INVALID_REGISTRATION", 120: "TRANSACTION_ABORTABLE", 121: "INVALID_RECORD_STATE",
    122: "SHARE_SESSION_NOT_FOUND", 123: "INVALID_SHARE_SESSION_EPOCH", 124: "FENCED_STATE_EPOCH",
    125: "INVALID_VOTER_KEY", 126: "DUPLICATE_VOTER", 127: "VOTER_NOT_FOUND",
    128: "INVALID_REGULAR_EXPRESSION", 129: "REBOOTSTRAP_REQUIRED",
}


def error_name(code):
    """Kafka's name of an error code.

    Args:
        code: The error code (int).

    Returns:
        str: Its name, e.g. ``"UNKNOWN_TOPIC_OR_PARTITION"``, or
        ``"UNKNOWN_ERROR_CODE_<code>"``.
    """
    return ERROR_NAMES.get(code, f"UNKNOWN_ERROR_CODE_{code}")


class ProtocolError(KafkaFormatError):
    """A frame or message that does not follow Kafka's wire protocol.

    Its message names the API, version and field path where decoding failed
    and the byte position in the frame, e.g. ``40 bytes needed, 20 left (at
    byte 67) [Fetch v11, field responses[0].partitions[0].records]``.

    Args:
        message: What is wrong.
        api: The API's name.
        version: The API version.
        field: The field path, e.g. ``responses[0].partitions[0].records``.
        **where: ``position``, ``offset`` and ``source``, as for
            :class:`~kcodec.errors.KafkaFormatError`.

    Attributes:
        api (str | None): The API's name.
        version (int | None): The API version.
        field (str | None): The field path.
    """

    def __init__(self, message, *, api=None, version=None, field=None, **where):
        self.api = api
        self.version = version
        self.field = field
        super().__init__(message, **where)

    def _describe(self):
        context = []
        if self.api is not None:
            context.append(f"{self.api} v{self.version}" if self.version is not None else
                           str(self.api))
        if self.field:
            context.append(f"field {self.field}")
        text = super()._describe()
        return f"{text} [{', '.join(context)}]" if context else text


class UnsupportedVersionError(ProtocolError):
    """An API or version outside what the schemas (or the broker) support."""


class BrokerError(Exception):
    """A non-zero error code in a broker's response.

    Args:
        code: The error code.
        api: The API's name.
        topic: The topic it was found under, if any.
        partition: The partition it was found under, if any.
        message: The response's error message, if any.

    Attributes:
        code (int): The error code.
        name (str): Kafka's name for it, e.g. ``"UNKNOWN_TOPIC_OR_PARTITION"``.
        api (str | None): The API's name.
        topic (str | None): The topic.
        partition (int | None): The partition.
        error_message (str | None): The broker's message.
    """

    def __init__(self, code, *, api=None, topic=None, partition=None, message=None):
        self.code = code
        self.name = error_name(code)
        self.api = api
        self.topic = topic
        self.partition = partition
        self.error_message = message
        where = [str(x) for x in (api, topic, partition) if x is not None]
        text = f"{self.name} (error code {code})"
        if where:
            text += " in " + " ".join(where)
        if message:
            text += f": {message}"
        super().__init__(text)

    def __reduce__(self):
        return (_rebuild_broker_error, (self.code, self.api, self.topic, self.partition,
                                        self.error_message))


def _rebuild_broker_error(code, api, topic, partition, message):
    return BrokerError(code, api=api, topic=topic, partition=partition, message=message)


class ConnectionLost(ConnectionError):
    """The broker closed the connection, or it broke, before a whole response."""


class RequestTimedOut(TimeoutError):
    """No whole response arrived within the connection's timeout."""
