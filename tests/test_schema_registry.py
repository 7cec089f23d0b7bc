"""Schema sources (kcodec/values/registry.py) against real peers: the REST
client against a real Apicurio Registry (tests/schema_registry_server.py),
behind a counting / basic-auth / HTTPS proxy where the test needs one; the
offline _schemas reader against records a real broker wrote."""
import json
import os
import pickle
import shutil
import socket
import threading
import uuid

import pytest

import kcodec
from kcodec.errors import (
    SchemaNotFoundError, SchemaRegistryAuthError, SchemaRegistryError,
    SchemaRegistryUnavailableError,
)
from kcodec.values.registry import (
    RegisteredSchema, SchemaLog, SchemaMapping, SchemaRegistry, registry_from_options,
    schema_source, split_credentials,
)
from needs import require_module
from kafka_broker import Delivery, broker, confluent_producer  # noqa: F401  (fixture)
from s3_server import s3  # noqa: F401  (fixture)
from schema_registry_server import (  # noqa: F401  (fixture)
    RegistryProxy, free_port, make_certificates, schema_registry,
)

USER, PASSWORD = "reader", "s3cret-Pa55"


def record_schema(name, *fields):
    return {"type": "record", "name": name, "namespace": "kcodec.test",
            "fields": [{"name": f, "type": t, **({"default": d} if d is not ... else {})}
                       for f, t, d in fields]}


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}-value"


@pytest.fixture
def proxy(schema_registry):
    with RegistryProxy(schema_registry.url) as running:
        yield running


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certificates"))


# ------------------------------------------------------------------ REST

def test_schema_by_id(schema_registry):
    schema = record_schema("Order", ("id", "long", ...), ("note", ["null", "string"], None))
    schema_id = schema_registry.register(unique("orders"), schema)
    found = SchemaRegistry(schema_registry.url).schema(schema_id)
    assert isinstance(found, RegisteredSchema)
    assert found.id == schema_id
    assert found.schema_type == "AVRO"
    assert json.loads(found.text) == schema


def test_json_schema_type(schema_registry):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    schema_id = schema_registry.register(unique("json"), schema, "JSON")
    found = SchemaRegistry(schema_registry.url).schema(schema_id)
    assert (found.id, found.schema_type) == (schema_id, "JSON")
    assert json.loads(found.text) == schema


def test_latest_version_of_a_subject(schema_registry):
    subject = unique("evolving")
    first = schema_registry.register(subject, record_schema("E", ("a", "long", ...)))
    second = schema_registry.register(subject, record_schema("E", ("a", "long", ...),
                                                             ("b", "string", "")))
    assert first != second
    registry = SchemaRegistry(schema_registry.url)
    latest = registry.latest(subject)
    assert (latest.id, latest.subject, latest.version) == (second, subject, 2)
    assert latest.schema_type == "AVRO"
    assert [f["name"] for f in json.loads(latest.text)["fields"]] == ["a", "b"]
    assert registry.schema(first).id == first


def test_unknown_id_is_schema_not_found(schema_registry):
    missing = 987_654
    with pytest.raises(SchemaNotFoundError) as caught:
        SchemaRegistry(schema_registry.url).schema(missing)
    error = caught.value
    assert error.schema_id == missing
    assert error.url == schema_registry.url
    assert schema_registry.url in str(error) and str(missing) in str(error)
    assert isinstance(error, LookupError) and isinstance(error, SchemaRegistryError)
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), again.schema_id, again.url, str(again)) == \
        (SchemaNotFoundError, missing, schema_registry.url, str(error))


def test_unknown_subject_is_schema_not_found(schema_registry):
    subject = unique("nobody")
    with pytest.raises(SchemaNotFoundError) as caught:
        SchemaRegistry(schema_registry.url).latest(subject)
    assert caught.value.subject == subject
    assert caught.value.schema_id is None
    assert subject in str(caught.value)


def test_nothing_listening_is_unavailable():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(SchemaRegistryUnavailableError) as caught:
        SchemaRegistry(url, timeout=5).schema(1)
    assert caught.value.url == url
    assert url in str(caught.value) and "refused" in str(caught.value)


def test_no_answer_is_unavailable():
    # a port that takes connections (the kernel's backlog) and never answers
    with socket.create_server(("127.0.0.1", 0)) as silent:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(SchemaRegistryUnavailableError) as caught:
            SchemaRegistry(url, timeout=1).schema(1)
    assert "no answer" in str(caught.value) and url in str(caught.value)


def test_unknown_host_is_unavailable():
    with pytest.raises(SchemaRegistryUnavailableError) as caught:
        SchemaRegistry("http://registry.invalid:8081", timeout=5).schema(1)
    assert "registry.invalid" in str(caught.value)


def test_not_the_registry_api(schema_registry):
    # the server's root, not its Confluent-compatible API
    root = schema_registry.url.rsplit("/apis/", 1)[0]
    with pytest.raises(SchemaRegistryError) as caught:
        SchemaRegistry(root).schema(1)
    assert not isinstance(caught.value, SchemaNotFoundError)
    assert root in str(caught.value) and "Confluent-compatible API" in str(caught.value)


# --------------------------------------------------------------- caching

def test_each_id_is_fetched_once_per_process(schema_registry, proxy):
    schema_id = schema_registry.register(unique("cached"), record_schema("C", ("a", "int", ...)))
    first = SchemaRegistry(proxy.url)
    results = []

    def ask():
        # a new client each time: the cache is the process's, by URL and user
        results.append(SchemaRegistry(proxy.url).schema(schema_id))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results += [first.schema(schema_id) for _ in range(5)]
    assert len(results) == 13 and len(set(results)) == 1
    assert proxy.schema_hits(schema_id) == 1
    # a pickled client (a Spark task's) uses the same cache
    assert pickle.loads(pickle.dumps(first)).schema(schema_id) == results[0]
    assert proxy.schema_hits(schema_id) == 1
    # and with nothing answering any more, the cached id still resolves
    proxy.close()
    assert SchemaRegistry(proxy.url).schema(schema_id) == results[0]
    with pytest.raises(SchemaRegistryUnavailableError):
        SchemaRegistry(proxy.url).schema(schema_id + 1000)


def test_latest_is_asked_each_time_and_fills_the_id_cache(schema_registry, proxy):
    subject = unique("latest")
    schema_registry.register(subject, record_schema("L", ("a", "int", ...)))
    registry = SchemaRegistry(proxy.url)
    first = registry.latest(subject)
    second_id = schema_registry.register(subject, record_schema("L", ("a", "int", ...),
                                                                ("b", "int", 0)))
    assert registry.latest(subject).id == second_id
    assert registry.schema(first.id) == first
    assert registry.schema(second_id).id == second_id
    assert proxy.schema_hits(first.id) == 0 and proxy.schema_hits(second_id) == 0


def test_server_errors_are_tried_again(schema_registry, proxy):
    schema_id = schema_registry.register(unique("retry"), record_schema("R", ("a", "int", ...)))
    proxy.fail_next = 2
    assert SchemaRegistry(proxy.url).schema(schema_id).id == schema_id
    assert proxy.schema_hits(schema_id) == 3


def test_a_dropped_connection_is_tried_again(schema_registry, proxy):
    schema_id = schema_registry.register(unique("drop"), record_schema("D", ("a", "int", ...)))
    proxy.drop_next = 1
    assert SchemaRegistry(proxy.url).schema(schema_id).id == schema_id
    assert proxy.schema_hits(schema_id) == 2


def test_server_errors_give_up_after_a_few_tries(schema_registry, proxy):
    proxy.fail_next = 100
    with pytest.raises(SchemaRegistryUnavailableError) as caught:
        SchemaRegistry(proxy.url).schema(424242)
    assert "503" in str(caught.value) and proxy.url in str(caught.value)
    assert proxy.schema_hits(424242) == 3


# --------------------------------------------------------------- pickling

def test_pickles_with_url_and_options(tmp_path):
    registry = SchemaRegistry("https://registry.example:8081/", username=USER, password=PASSWORD,
                              cafile=tmp_path / "ca.pem", verify=False, timeout=3)
    again = pickle.loads(pickle.dumps(registry))
    assert type(again) is SchemaRegistry
    assert (again.url, again.username, again.cafile, again.verify, again.timeout) == \
        ("https://registry.example:8081", USER, str(tmp_path / "ca.pem"), False, 3.0)
    assert again.spark_options() == registry.spark_options()
    assert registry_from_options(again.url, again.spark_options()).spark_options() == \
        registry.spark_options()


def test_the_password_is_never_shown(schema_registry):
    with RegistryProxy(schema_registry.url, username=USER, password=PASSWORD) as guarded:
        wrong = "wrong-" + PASSWORD
        host = guarded.url.split("://", 1)[1]
        for registry in (SchemaRegistry(guarded.url, username=USER, password=wrong),
                         SchemaRegistry(f"http://{USER}:{wrong}@{host}")):
            assert wrong not in repr(registry) and wrong not in registry.url
            with pytest.raises(SchemaRegistryAuthError) as caught:
                registry.schema(1)
            assert wrong not in str(caught.value) and wrong not in repr(caught.value)
            assert USER in str(caught.value)
    unreachable = SchemaRegistry(f"http://{USER}:{wrong}@127.0.0.1:{free_port()}")
    with pytest.raises(SchemaRegistryUnavailableError) as caught:
        unreachable.schema(1)
    assert wrong not in str(caught.value)


# ------------------------------------------------------------ auth and TLS

def test_basic_auth(schema_registry):
    subject = unique("auth")
    schema_id = schema_registry.register(subject, record_schema("A", ("a", "int", ...)))
    with RegistryProxy(schema_registry.url, username=USER, password=PASSWORD) as guarded:
        with pytest.raises(SchemaRegistryAuthError) as caught:
            SchemaRegistry(guarded.url).schema(schema_id)
        assert "401" in str(caught.value) and caught.value.url == guarded.url
        with pytest.raises(SchemaRegistryAuthError):
            SchemaRegistry(guarded.url, username=USER, password="nope").latest(subject)
        right = SchemaRegistry(guarded.url, username=USER, password=PASSWORD)
        assert right.schema(schema_id).id == schema_id
        # in the URL, as Confluent's clients take them (percent-escaped)
        host = guarded.url.split("://", 1)[1]
        embedded = SchemaRegistry(f"http://{USER}:{PASSWORD.replace('-', '%2D')}@{host}")
        assert (embedded.url, embedded.username) == (guarded.url, USER)
        assert embedded.latest(subject).id == schema_id
        # Spark-style options, any case
        options = {"schemaRegistry.USERNAME": USER, "SchemaRegistry.Password": PASSWORD,
                   "kafka.bootstrap.servers": "ignored", "valueFormat": "avro"}
        assert registry_from_options(guarded.url, options).latest(subject).id == schema_id
        confluent_names = {"schemaRegistry.basic.auth.user.info": f"{USER}:{PASSWORD}"}
        assert registry_from_options(guarded.url, confluent_names).latest(subject).id == schema_id
        with pytest.raises(SchemaRegistryAuthError):
            registry_from_options(guarded.url, {"schemaRegistry.username": USER}).latest(subject)


def test_tls(schema_registry, certificates):
    ids = [schema_registry.register(unique("tls"), record_schema(f"T{i}", ("a", "int", ...)))
           for i in range(4)]
    with RegistryProxy(schema_registry.url, username=USER, password=PASSWORD,
                       certfile=certificates["server_cert"],
                       keyfile=certificates["server_key"]) as secure:
        assert secure.url.startswith("https://")
        trusted = SchemaRegistry(secure.url, username=USER, password=PASSWORD,
                                 cafile=certificates["ca"])
        assert trusted.schema(ids[0]).id == ids[0]
        for untrusted in (SchemaRegistry(secure.url, username=USER, password=PASSWORD),
                          SchemaRegistry(secure.url, username=USER, password=PASSWORD,
                                         cafile=certificates["other_ca"])):
            with pytest.raises(SchemaRegistryUnavailableError) as caught:
                untrusted.schema(ids[1])
            assert "TLS" in str(caught.value) and secure.url in str(caught.value)
        unchecked = SchemaRegistry(secure.url, username=USER, password=PASSWORD, verify=False)
        assert unchecked.schema(ids[2]).id == ids[2]
        by_options = registry_from_options(secure.url, {
            "schemaRegistry.username": USER, "schemaRegistry.password": PASSWORD,
            "schemaRegistry.cafile": certificates["ca"], "schemaRegistry.timeout": "5"})
        assert by_options.schema(ids[3]).id == ids[3]
        assert secure.schema_hits(ids[1]) == 0       # refused before any request
        # plain HTTP to an HTTPS port: no registry answers there
        with pytest.raises(SchemaRegistryError):
            SchemaRegistry(secure.url.replace("https://", "http://"), timeout=5).schema(1)


def test_client_certificates(schema_registry, certificates):
    schema_id = schema_registry.register(unique("mtls"), record_schema("M", ("a", "int", ...)))
    with RegistryProxy(schema_registry.url, certfile=certificates["server_cert"],
                       keyfile=certificates["server_key"],
                       client_ca=certificates["ca"]) as mutual:
        with_cert = SchemaRegistry(mutual.url, cafile=certificates["ca"],
                                   certfile=certificates["client_cert"],
                                   keyfile=certificates["client_key"])
        assert with_cert.schema(schema_id).id == schema_id
        with pytest.raises(SchemaRegistryUnavailableError):
            SchemaRegistry(mutual.url, cafile=certificates["ca"]).schema(schema_id + 1)


def test_missing_tls_files_are_named(tmp_path):
    missing = tmp_path / "nowhere.pem"
    with pytest.raises(SchemaRegistryError) as caught:
        SchemaRegistry(f"https://127.0.0.1:{free_port()}", cafile=missing).schema(1)
    assert str(missing) in str(caught.value)


# ---------------------------------------------------------------- options

def test_options_are_checked():
    with pytest.raises(ValueError, match="schemaRegistry.usr"):
        registry_from_options("http://127.0.0.1:1", {"schemaRegistry.usr": "x"})
    with pytest.raises(ValueError, match="true or false"):
        registry_from_options("http://127.0.0.1:1", {"schemaRegistry.verify": "maybe"})
    with pytest.raises(ValueError, match="seconds"):
        registry_from_options("http://127.0.0.1:1", {"schemaRegistry.timeout": "soon"})
    with pytest.raises(ValueError, match="seconds"):
        registry_from_options("http://127.0.0.1:1", {"schemaRegistry.timeout": "0"})
    registry = registry_from_options("http://127.0.0.1:1", {
        "SCHEMAREGISTRY.VERIFY": "False", "schemaRegistry.timeout": "2.5"})
    assert (registry.verify, registry.timeout, registry.username) == (False, 2.5, None)
    with pytest.raises(ValueError, match="http:// or https://"):
        SchemaRegistry("ftp://example.com")


def test_url_credentials_are_split():
    assert split_credentials("https://u:p%40ss@host:8081/x") == ("https://host:8081/x", "u", "p@ss")
    assert split_credentials("http://host:8081") == ("http://host:8081", None, None)
    registry = SchemaRegistry("https://u:pw@host:8081/")
    assert (registry.url, registry.username, repr(registry)) == \
        ("https://host:8081", "u", "SchemaRegistry('https://host:8081', username='u')")
    assert registry.spark_options() == {"schemaRegistry.username": "u",
                                        "schemaRegistry.password": "pw"}


# ---------------------------------------------------------------- mapping

def test_schema_mapping():
    avro = record_schema("M", ("a", "long", ...))
    mapping = SchemaMapping({
        1: avro,
        2: json.dumps(avro),
        3: b'"string"',
        4: {"schema": {"type": "object"}, "schemaType": "json", "subject": "j-value",
            "version": 3},
        5: {"schema": json.dumps(avro), "subject": "m-value", "version": 1},
        6: RegisteredSchema(6, "AVRO", json.dumps(avro), "m-value", 2),
        7: ["null", "string"],
    })
    assert len(mapping) == 7
    assert mapping.schema(1) == RegisteredSchema(1, "AVRO", json.dumps(avro))
    assert json.loads(mapping.schema(2).text) == avro
    assert mapping.schema(3).text == '"string"'
    assert (mapping.schema(4).schema_type, json.loads(mapping.schema(4).text)) == \
        ("JSON", {"type": "object"})
    assert json.loads(mapping.schema(7).text) == ["null", "string"]
    assert mapping.latest("m-value").id == 6
    assert mapping.latest("j-value").version == 3
    with pytest.raises(SchemaNotFoundError) as caught:
        mapping.schema(99)
    assert caught.value.schema_id == 99
    with pytest.raises(SchemaNotFoundError):
        mapping.latest("other")
    assert pickle.loads(pickle.dumps(mapping)).schema(4) == mapping.schema(4)
    with pytest.raises(ValueError, match=r"schemas\[8\]"):
        SchemaMapping({8: "{not json"})
    with pytest.raises(TypeError, match="schema id"):
        SchemaMapping({"8": avro})
    with pytest.raises(TypeError, match=r"schemas\[9\]"):
        SchemaMapping({9: 3.5})
    with pytest.raises(ValueError, match="RegisteredSchema of id 1"):
        SchemaMapping({2: mapping.schema(1)})
    with pytest.raises(ValueError, match="schema type"):
        SchemaMapping({1: {"schema": "{}", "schemaType": "XML"}})


# ---------------------------------------------------------------- choosing

def test_schema_source_choices(tmp_path):
    assert schema_source(None) is None
    mapping = schema_source({1: '"long"'})
    assert isinstance(mapping, SchemaMapping) and mapping.schema(1).text == '"long"'
    assert schema_source(mapping) is mapping
    url = f"http://127.0.0.1:{free_port()}/apis/ccompat/v6"
    registry = schema_source(url)
    assert isinstance(registry, SchemaRegistry) and registry.url == url
    assert schema_source(url) is registry
    assert schema_source(registry) is registry
    given = SchemaRegistry(url, timeout=1)
    assert schema_source(given) is given
    empty = tmp_path / "_schemas-0"
    empty.mkdir()
    log = schema_source(empty)
    assert isinstance(log, SchemaLog) and log.ids == [] and log.subjects == []
    assert schema_source(str(empty)).path == str(empty)
    with pytest.raises(ValueError, match="neither"):
        schema_source(str(tmp_path / "absent"))
    with pytest.raises(TypeError, match="not int"):
        schema_source(42)
    assert kcodec.SchemaRegistry is SchemaRegistry


def test_registry_from_options_takes_a_schemas_directory(tmp_path):
    directory = tmp_path / "_schemas-0"
    directory.mkdir()
    assert isinstance(registry_from_options(str(directory), {}), SchemaLog)
    with pytest.raises(ValueError, match="schemaRegistry.username"):
        registry_from_options(str(directory), {"schemaRegistry.username": "u"})


# ------------------------------------------------------------ _schemas log

def _key(keytype, subject=None, version=None, magic=1):
    key = {"keytype": keytype}
    if subject is not None:
        key["subject"] = subject
    if version is not None:
        key["version"] = version
    key["magic"] = magic
    return json.dumps(key, separators=(",", ":")).encode()


def _value(subject, version, schema_id, schema, schema_type=None, deleted=None):
    value = {"subject": subject, "version": version, "id": schema_id,
             "schema": schema if isinstance(schema, str) else json.dumps(schema)}
    if schema_type is not None:
        value["schemaType"] = schema_type
    if deleted is not None:
        value["deleted"] = deleted
    return json.dumps(value, separators=(",", ":")).encode()


ORDERS_V1 = record_schema("Order", ("id", "long", ...))
ORDERS_V2 = record_schema("Order", ("id", "long", ...), ("note", ["null", "string"], None))
ORDERS_V3 = record_schema("Order", ("id", "long", ...), ("total", "double", 0.0))
PAYMENTS = {"type": "object", "properties": {"amount": {"type": "number"}}}
OLD = record_schema("Old", ("x", "int", ...))

# (key, value) as Confluent Schema Registry writes them to _schemas
SCHEMAS_RECORDS = [
    (_key("NOOP", magic=0), None),
    (_key("CONFIG", magic=0), b'{"compatibilityLevel":"BACKWARD"}'),
    (_key("SCHEMA", "orders-value", 1), _value("orders-value", 1, 1, ORDERS_V1)),
    (_key("SCHEMA", "orders-value", 2), _value("orders-value", 2, 2, ORDERS_V2)),
    (_key("SCHEMA", "payments-value", 1), _value("payments-value", 1, 3, PAYMENTS, "JSON")),
    (_key("CONFIG", "orders-value", magic=0), b'{"compatibilityLevel":"FULL"}'),
    # version 3, then deleted for good (a tombstone)
    (_key("SCHEMA", "orders-value", 3), _value("orders-value", 3, 4, ORDERS_V3)),
    (_key("SCHEMA", "orders-value", 3), None),
    # the id of orders-value 1, registered again under another subject
    (_key("SCHEMA", "copy-value", 1), _value("copy-value", 1, 1, ORDERS_V1)),
    # registered, then soft-deleted with its subject
    (_key("SCHEMA", "old-value", 1), _value("old-value", 1, 5, OLD)),
    (_key("SCHEMA", "old-value", 1), _value("old-value", 1, 5, OLD, deleted=True)),
    (_key("DELETE_SUBJECT", "old-value", magic=0), b'{"subject":"old-value","version":1}'),
    # two versions, the later soft-deleted: the earlier is the latest
    (_key("SCHEMA", "two-value", 1), _value("two-value", 1, 6, OLD)),
    (_key("SCHEMA", "two-value", 2), _value("two-value", 2, 7, ORDERS_V1, deleted=True)),
    (_key("CLEAR_SUBJECT", "two-value", magic=0), b'{"subject":"two-value"}'),
]


@pytest.fixture(scope="module")
def schemas_dir(broker, tmp_path_factory):  # noqa: F811
    topic = f"_schemas-{uuid.uuid4().hex[:6]}"
    broker.create_topic(topic, cleanup_policy="compact")
    producer = confluent_producer(broker)
    delivery = Delivery()
    for key, value in SCHEMAS_RECORDS:
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=delivery)
    delivery.check(producer)
    # a copy named as the registry's own topic is, read while nothing writes
    copy = tmp_path_factory.mktemp("log") / "_schemas-0"
    shutil.copytree(broker.partition_dir(topic), copy)
    return {"live": broker.partition_dir(topic), "copy": copy}


def test_schemas_log_by_id(schemas_dir):
    log = SchemaLog(schemas_dir["copy"])
    assert log.ids == [1, 2, 3, 5, 6, 7]
    assert json.loads(log.schema(1).text) == ORDERS_V1
    assert log.schema(2) == RegisteredSchema(2, "AVRO", json.dumps(ORDERS_V2), "orders-value", 2)
    payments = log.schema(3)
    assert (payments.schema_type, json.loads(payments.text)) == ("JSON", PAYMENTS)
    # soft-deleted versions keep their ids, as the registry's /schemas/ids does
    assert json.loads(log.schema(5).text) == OLD
    assert log.schema(7).id == 7
    # a version deleted for good takes its id with it
    with pytest.raises(SchemaNotFoundError) as caught:
        log.schema(4)
    assert caught.value.schema_id == 4 and str(schemas_dir["copy"]) in str(caught.value)


def test_schemas_log_latest(schemas_dir):
    log = SchemaLog(schemas_dir["copy"])
    assert log.subjects == ["copy-value", "orders-value", "payments-value", "two-value"]
    latest = log.latest("orders-value")
    assert (latest.id, latest.version, json.loads(latest.text)) == (2, 2, ORDERS_V2)
    assert log.latest("copy-value").id == 1
    assert log.latest("two-value").id == 6
    with pytest.raises(SchemaNotFoundError) as caught:
        log.latest("old-value")
    assert caught.value.subject == "old-value"


def test_schemas_log_of_a_running_broker(schemas_dir):
    # the live partition directory (another topic's name) of the running broker
    source = schema_source(schemas_dir["live"])
    assert isinstance(source, SchemaLog)
    assert source.ids == [1, 2, 3, 5, 6, 7]
    assert source.latest("orders-value").id == 2


def test_schemas_log_pickles_what_it_read(schemas_dir, tmp_path):
    directory = tmp_path / "_schemas-0"
    shutil.copytree(schemas_dir["copy"], directory)
    log = SchemaLog(directory)
    data = pickle.dumps(log)
    shutil.rmtree(directory)
    again = pickle.loads(data)
    assert again.ids == log.ids and again.schema(3) == log.schema(3)
    assert again.latest("orders-value") == log.latest("orders-value")
    assert "ids=6" in repr(again)


def test_schemas_log_on_object_storage(schemas_dir, s3):  # noqa: F811
    require_module("pyspark")      # kcodec.spark reads object storage
    bucket = f"registry-{uuid.uuid4().hex[:6]}"
    s3.upload(schemas_dir["copy"], f"{bucket}/backup/_schemas-0")
    uri = f"s3://{bucket}/backup/_schemas-0"
    local = SchemaLog(schemas_dir["copy"])
    remote = SchemaLog(uri, storage_options=s3.options())
    assert remote.path == uri
    assert remote.ids == local.ids and remote.subjects == local.subjects
    assert [remote.schema(i) for i in remote.ids] == [local.schema(i) for i in local.ids]
    # as kafka-log passes its options: the s3.* ones say where
    options = {**s3.options(), "valueFormat": "avro"}
    by_options = registry_from_options(uri, options)
    assert isinstance(by_options, SchemaLog) and by_options.latest("orders-value").id == 2


def test_schemas_log_names_a_bad_value(broker, tmp_path):  # noqa: F811
    topic = f"_schemas-bad-{uuid.uuid4().hex[:6]}"
    broker.create_topic(topic)
    producer = confluent_producer(broker)
    delivery = Delivery()
    producer.produce(topic, key=_key("SCHEMA", "s-value", 1), value=b'{"subject":"s-value"}',
                     partition=0, on_delivery=delivery)
    delivery.check(producer)
    with pytest.raises(SchemaRegistryError, match="offset 0") as caught:
        SchemaLog(broker.partition_dir(topic))
    assert "s-value" in str(caught.value)


def test_not_a_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        SchemaLog(tmp_path / "absent")
    assert os.path.isdir(tmp_path)
