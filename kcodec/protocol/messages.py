"""The schemas kcodec speaks, transcribed from Apache Kafka's message
definitions (field names in snake_case, types, version ranges, nullable
versions, tags and defaults) into kcodec.protocol.schema's notation. Versions
cover every version Kafka has defined for these APIs, including those a 4.x
broker no longer accepts (Produce v0-2, Fetch v0-3, ListOffsets v0)."""
from .schema import Message, field as f, many, one, record_type

AbortedTransaction = record_type("AbortedTransaction", "producer_id first_offset")
AbortedTransaction.__doc__ = ("An entry of a Fetch response's aborted_transactions: "
                              "(producer_id, first_offset), as kcodec.decode's `aborted` takes it.")

REQUEST_HEADER = Message(None, "RequestHeader", "header", "0-2", "2+", [
    f("request_api_key", "int16", "0+"),
    f("request_api_version", "int16", "0+"),
    f("correlation_id", "int32", "0+"),
    f("client_id", "string", "1+", nullable="1+", compact=False),
])

RESPONSE_HEADER = Message(None, "ResponseHeader", "header", "0-1", "1+", [
    f("correlation_id", "int32", "0+"),
])


def _node_endpoints(versions):
    return f("node_endpoints", many(
        f("node_id", "int32", versions),
        f("host", "string", versions),
        f("port", "int32", versions),
        f("rack", "string", versions, nullable=versions, default=None),
    ), versions, tag=0)


def _leader_id_and_epoch(versions, tag):
    return f("current_leader", one(
        f("leader_id", "int32", versions, default=-1),
        f("leader_epoch", "int32", versions, default=-1),
    ), versions, tag=tag)


API_VERSIONS_REQUEST = Message(18, "ApiVersions", "request", "0-4", "3+", [
    f("client_software_name", "string", "3+"),
    f("client_software_version", "string", "3+"),
])

API_VERSIONS_RESPONSE = Message(18, "ApiVersions", "response", "0-4", "3+", [
    f("error_code", "int16", "0+"),
    f("api_keys", many(
        f("api_key", "int16", "0+"),
        f("min_version", "int16", "0+"),
        f("max_version", "int16", "0+"),
    ), "0+"),
    f("throttle_time_ms", "int32", "1+"),
    f("supported_features", many(
        f("name", "string", "3+"),
        f("min_version", "int16", "3+"),
        f("max_version", "int16", "3+"),
    ), "3+", tag=0),
    f("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
    f("finalized_features", many(
        f("name", "string", "3+"),
        f("max_version_level", "int16", "3+"),
        f("min_version_level", "int16", "3+"),
    ), "3+", tag=2),
    f("zk_migration_ready", "bool", "3+", tag=3, default=False),
])

METADATA_REQUEST = Message(3, "Metadata", "request", "0-13", "9+", [
    f("topics", many(
        f("topic_id", "uuid", "10+"),
        f("name", "string", "0+", nullable="10+"),
    ), "0+", nullable="1+"),
    f("allow_auto_topic_creation", "bool", "4+", default=True),
    f("include_cluster_authorized_operations", "bool", "8-10"),
    f("include_topic_authorized_operations", "bool", "8+"),
])

METADATA_RESPONSE = Message(3, "Metadata", "response", "0-13", "9+", [
    f("throttle_time_ms", "int32", "3+"),
    f("brokers", many(
        f("node_id", "int32", "0+"),
        f("host", "string", "0+"),
        f("port", "int32", "0+"),
        f("rack", "string", "1+", nullable="1+", default=None),
    ), "0+"),
    f("cluster_id", "string", "2+", nullable="2+", default=None),
    f("controller_id", "int32", "1+", default=-1),
    f("topics", many(
        f("error_code", "int16", "0+"),
        f("name", "string", "0+", nullable="12+"),
        f("topic_id", "uuid", "10+"),
        f("is_internal", "bool", "1+", default=False),
        f("partitions", many(
            f("error_code", "int16", "0+"),
            f("partition_index", "int32", "0+"),
            f("leader_id", "int32", "0+"),
            f("leader_epoch", "int32", "7+", default=-1),
            f("replica_nodes", "[]int32", "0+"),
            f("isr_nodes", "[]int32", "0+"),
            f("offline_replicas", "[]int32", "5+"),
        ), "0+"),
        f("topic_authorized_operations", "int32", "8+", default=-2147483648),
    ), "0+"),
    f("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
    f("error_code", "int16", "13+"),
])

PRODUCE_REQUEST = Message(0, "Produce", "request", "0-13", "9+", [
    f("transactional_id", "string", "3+", nullable="3+", default=None),
    f("acks", "int16", "0+"),
    f("timeout_ms", "int32", "0+"),
    f("topic_data", many(
        f("name", "string", "0-12"),
        f("topic_id", "uuid", "13+"),
        f("partition_data", many(
            f("index", "int32", "0+"),
            f("records", "records", "0+", nullable="0+"),
        ), "0+"),
    ), "0+"),
])

PRODUCE_RESPONSE = Message(0, "Produce", "response", "0-13", "9+", [
    f("responses", many(
        f("name", "string", "0-12"),
        f("topic_id", "uuid", "13+"),
        f("partition_responses", many(
            f("index", "int32", "0+"),
            f("error_code", "int16", "0+"),
            f("base_offset", "int64", "0+"),
            f("log_append_time_ms", "int64", "2+", default=-1),
            f("log_start_offset", "int64", "5+", default=-1),
            f("record_errors", many(
                f("batch_index", "int32", "8+"),
                f("batch_index_error_message", "string", "8+", nullable="8+", default=None),
            ), "8+"),
            f("error_message", "string", "8+", nullable="8+", default=None),
            _leader_id_and_epoch("10+", tag=0),
        ), "0+"),
    ), "0+"),
    f("throttle_time_ms", "int32", "1+", default=0),
    _node_endpoints("10+"),
])

FETCH_REQUEST = Message(1, "Fetch", "request", "0-18", "12+", [
    f("cluster_id", "string", "12+", nullable="12+", default=None, tag=0),
    f("replica_id", "int32", "0-14", default=-1),
    f("replica_state", one(
        f("replica_id", "int32", "15+", default=-1),
        f("replica_epoch", "int64", "15+", default=-1),
    ), "15+", tag=1),
    f("max_wait_ms", "int32", "0+"),
    f("min_bytes", "int32", "0+"),
    f("max_bytes", "int32", "3+", default=0x7FFFFFFF),
    f("isolation_level", "int8", "4+", default=0),
    f("session_id", "int32", "7+", default=0),
    f("session_epoch", "int32", "7+", default=-1),
    f("topics", many(
        f("topic", "string", "0-12"),
        f("topic_id", "uuid", "13+"),
        f("partitions", many(
            f("partition", "int32", "0+"),
            f("current_leader_epoch", "int32", "9+", default=-1),
            f("fetch_offset", "int64", "0+"),
            f("last_fetched_epoch", "int32", "12+", default=-1),
            f("log_start_offset", "int64", "5+", default=-1),
            f("partition_max_bytes", "int32", "0+"),
            f("replica_directory_id", "uuid", "17+", tag=0),
            f("high_watermark", "int64", "18+", tag=1, default=0x7FFFFFFFFFFFFFFF),
        ), "0+"),
    ), "0+"),
    f("forgotten_topics_data", many(
        f("topic", "string", "7-12"),
        f("topic_id", "uuid", "13+"),
        f("partitions", "[]int32", "7+"),
    ), "7+"),
    f("rack_id", "string", "11+", default=""),
])

FETCH_RESPONSE = Message(1, "Fetch", "response", "0-18", "12+", [
    f("throttle_time_ms", "int32", "1+"),
    f("error_code", "int16", "7+"),
    f("session_id", "int32", "7+", default=0),
    f("responses", many(
        f("topic", "string", "0-12"),
        f("topic_id", "uuid", "13+"),
        f("partitions", many(
            f("partition_index", "int32", "0+"),
            f("error_code", "int16", "0+"),
            f("high_watermark", "int64", "0+"),
            f("last_stable_offset", "int64", "4+", default=-1),
            f("log_start_offset", "int64", "5+", default=-1),
            f("diverging_epoch", one(
                f("epoch", "int32", "12+", default=-1),
                f("end_offset", "int64", "12+", default=-1),
            ), "12+", tag=0),
            _leader_id_and_epoch("12+", tag=1),
            f("snapshot_id", one(
                f("end_offset", "int64", "0+", default=-1),
                f("epoch", "int32", "0+", default=-1),
            ), "12+", tag=2),
            f("aborted_transactions", many(
                f("producer_id", "int64", "4+"),
                f("first_offset", "int64", "4+"),
                record=AbortedTransaction,
            ), "4+", nullable="4+"),
            f("preferred_read_replica", "int32", "11+", default=-1),
            f("records", "records", "0+", nullable="0+"),
        ), "0+"),
    ), "0+"),
    _node_endpoints("16+"),
])

LIST_OFFSETS_REQUEST = Message(2, "ListOffsets", "request", "0-11", "6+", [
    f("replica_id", "int32", "0+"),
    f("isolation_level", "int8", "2+"),
    f("topics", many(
        f("name", "string", "0+"),
        f("partitions", many(
            f("partition_index", "int32", "0+"),
            f("current_leader_epoch", "int32", "4+", default=-1),
            f("timestamp", "int64", "0+"),
            f("max_num_offsets", "int32", "0", default=1),
        ), "0+"),
    ), "0+"),
    f("timeout_ms", "int32", "10+"),
])

LIST_OFFSETS_RESPONSE = Message(2, "ListOffsets", "response", "0-11", "6+", [
    f("throttle_time_ms", "int32", "2+"),
    f("topics", many(
        f("name", "string", "0+"),
        f("partitions", many(
            f("partition_index", "int32", "0+"),
            f("error_code", "int16", "0+"),
            f("old_style_offsets", "[]int64", "0"),
            f("timestamp", "int64", "1+", default=-1),
            f("offset", "int64", "1+", default=-1),
            f("leader_epoch", "int32", "4+", default=-1),
        ), "0+"),
    ), "0+"),
])

FIND_COORDINATOR_REQUEST = Message(10, "FindCoordinator", "request", "0-6", "3+", [
    f("key", "string", "0-3"),
    f("key_type", "int8", "1+", default=0),
    f("coordinator_keys", "[]string", "4+"),
])

FIND_COORDINATOR_RESPONSE = Message(10, "FindCoordinator", "response", "0-6", "3+", [
    f("throttle_time_ms", "int32", "1+"),
    f("error_code", "int16", "0-3"),
    f("error_message", "string", "1-3", nullable="1-3", default=None),
    f("node_id", "int32", "0-3"),
    f("host", "string", "0-3"),
    f("port", "int32", "0-3"),
    f("coordinators", many(
        f("key", "string", "4+"),
        f("node_id", "int32", "4+"),
        f("host", "string", "4+"),
        f("port", "int32", "4+"),
        f("error_code", "int16", "4+"),
        f("error_message", "string", "4+", nullable="4+", default=None),
    ), "4+"),
])

INIT_PRODUCER_ID_REQUEST = Message(22, "InitProducerId", "request", "0-6", "2+", [
    f("transactional_id", "string", "0+", nullable="0+", default=None),
    f("transaction_timeout_ms", "int32", "0+"),
    f("producer_id", "int64", "3+", default=-1),
    f("producer_epoch", "int16", "3+", default=-1),
    f("enable2_pc", "bool", "6+", default=False),
    f("keep_prepared_txn", "bool", "6+", default=False),
])

INIT_PRODUCER_ID_RESPONSE = Message(22, "InitProducerId", "response", "0-6", "2+", [
    f("throttle_time_ms", "int32", "0+"),
    f("error_code", "int16", "0+"),
    f("producer_id", "int64", "0+", default=-1),
    f("producer_epoch", "int16", "0+"),
    f("ongoing_txn_producer_id", "int64", "6+", default=-1),
    f("ongoing_txn_producer_epoch", "int16", "6+", default=-1),
])


def _add_partitions_topic(versions):
    return many(
        f("name", "string", versions),
        f("partitions", "[]int32", versions),
    )


def _add_partitions_topic_result():
    return many(
        f("name", "string", "0+"),
        f("results_by_partition", many(
            f("partition_index", "int32", "0+"),
            f("partition_error_code", "int16", "0+"),
        ), "0+"),
    )


ADD_PARTITIONS_TO_TXN_REQUEST = Message(24, "AddPartitionsToTxn", "request", "0-5", "3+", [
    f("transactions", many(
        f("transactional_id", "string", "4+"),
        f("producer_id", "int64", "4+"),
        f("producer_epoch", "int16", "4+"),
        f("verify_only", "bool", "4+", default=False),
        f("topics", _add_partitions_topic("0+"), "4+"),
    ), "4+"),
    f("v3_and_below_transactional_id", "string", "0-3"),
    f("v3_and_below_producer_id", "int64", "0-3"),
    f("v3_and_below_producer_epoch", "int16", "0-3"),
    f("v3_and_below_topics", _add_partitions_topic("0+"), "0-3"),
])

ADD_PARTITIONS_TO_TXN_RESPONSE = Message(24, "AddPartitionsToTxn", "response", "0-5", "3+", [
    f("throttle_time_ms", "int32", "0+"),
    f("error_code", "int16", "4+"),
    f("results_by_transaction", many(
        f("transactional_id", "string", "4+"),
        f("topic_results", _add_partitions_topic_result(), "4+"),
    ), "4+"),
    f("results_by_topic_v3_and_below", _add_partitions_topic_result(), "0-3"),
])

END_TXN_REQUEST = Message(26, "EndTxn", "request", "0-5", "3+", [
    f("transactional_id", "string", "0+"),
    f("producer_id", "int64", "0+"),
    f("producer_epoch", "int16", "0+"),
    f("committed", "bool", "0+"),
])

END_TXN_RESPONSE = Message(26, "EndTxn", "response", "0-5", "3+", [
    f("throttle_time_ms", "int32", "0+"),
    f("error_code", "int16", "0+"),
    f("producer_id", "int64", "5+", default=-1),
    f("producer_epoch", "int16", "5+", default=-1),
])

#: The request schemas kcodec speaks, by API key.
REQUESTS = {m.api_key: m for m in (
    API_VERSIONS_REQUEST, METADATA_REQUEST, PRODUCE_REQUEST, FETCH_REQUEST,
    LIST_OFFSETS_REQUEST, FIND_COORDINATOR_REQUEST, INIT_PRODUCER_ID_REQUEST,
    ADD_PARTITIONS_TO_TXN_REQUEST, END_TXN_REQUEST)}
#: The response schemas kcodec speaks, by API key.
RESPONSES = {m.api_key: m for m in (
    API_VERSIONS_RESPONSE, METADATA_RESPONSE, PRODUCE_RESPONSE, FETCH_RESPONSE,
    LIST_OFFSETS_RESPONSE, FIND_COORDINATOR_RESPONSE, INIT_PRODUCER_ID_RESPONSE,
    ADD_PARTITIONS_TO_TXN_RESPONSE, END_TXN_RESPONSE)}
