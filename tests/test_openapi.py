"""``controllers/openapi.yaml`` is the controller API's contract: a well-formed OpenAPI 3.1
document (its skeleton checked with pydantic, every schema against JSON Schema 2020-12 with
jsonschema: openapi-spec-validator is not a dependency), with exactly the routes and methods of
the route table the server dispatches on (:data:`controllers.api.ROUTES`), and real answers of
the real controller process (no switches) that fit its schemas, status by status."""

from __future__ import annotations

import http.client
import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, Field
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from controllers.api import ROUTES
from topologies import ocs_star

ROOT = Path(__file__).resolve().parents[1]
DOC_PATH = ROOT / "controllers" / "openapi.yaml"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
BASE = "urn:ocslab:controller-api"


def _doc() -> dict:
    return yaml.safe_load(DOC_PATH.read_text())


# ---- the document's skeleton (OpenAPI 3.1: the objects this document uses) ------------------
class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Info(_Open):
    title: str = Field(min_length=1)
    version: str = Field(min_length=1)


class _MediaType(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schema_: dict = Field(alias="schema")


class _Response(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = Field(min_length=1)
    headers: dict[str, dict] = {}
    content: dict[str, _MediaType] = {}


class _Ref(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    ref: str = Field(alias="$ref", pattern=r"^#/components/")


class _Parameter(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    in_: str = Field(alias="in", pattern="^(query|header|path|cookie)$")
    required: bool = False
    description: str = ""
    schema_: dict = Field(alias="schema")


class _RequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    required: bool = False
    content: dict[str, _MediaType]


class _Operation(BaseModel):
    model_config = ConfigDict(extra="forbid")
    operationId: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    summary: str = Field(min_length=1)
    description: str = ""
    parameters: list[_Parameter] = []
    requestBody: _RequestBody | None = None
    responses: dict[str, _Ref | _Response] = Field(min_length=1)


class _Components(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schemas: dict[str, dict] = {}
    responses: dict[str, _Response] = {}


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid")
    openapi: str = Field(pattern=r"^3\.1\.\d+$")
    info: _Info
    servers: list[dict] = []
    paths: dict[str, dict[str, _Operation]]
    components: _Components


def _pointer(doc: dict, pointer: str):
    node = doc
    for part in pointer.removeprefix("#/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _walk(node, at: str = "#"):
    """Every (JSON pointer, dict) in ``node``."""
    if isinstance(node, dict):
        yield at, node
        for k, v in node.items():
            yield from _walk(v, f"{at}/{str(k).replace('~', '~0').replace('/', '~1')}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, f"{at}/{i}")


def _schema_pointers(doc: dict) -> list[str]:
    """The JSON pointer of every schema the document holds (components' and inline ones)."""
    out = [f"#/components/schemas/{name}" for name in doc["components"]["schemas"]]
    for at, node in _walk(doc["paths"]):
        if "schema" in node and isinstance(node["schema"], dict):
            out.append(f"#/paths{at[1:]}/schema")
    for at, node in _walk(doc["components"]["responses"]):
        if "schema" in node and isinstance(node["schema"], dict):
            out.append(f"#/components/responses{at[1:]}/schema")
    return out


def _validator(doc: dict, pointer: str) -> Draft202012Validator:
    """A validator of the schema at ``pointer``, its ``#/components/...`` references resolved
    in ``doc``."""
    registry = Registry().with_resource(BASE, Resource.from_contents(doc, default_specification=DRAFT202012))
    return Draft202012Validator({"$ref": f"{BASE}{pointer}"}, registry=registry)


def _response_schema(doc: dict, method: str, path: str, status: int) -> str:
    """The pointer of the schema documented for ``status`` of ``method path``.

    :raises KeyError: that status is not documented there."""
    op = f"#/paths/{path.replace('/', '~1')}/{method.lower()}"
    resp = _pointer(doc, op)["responses"][str(status)]
    at = resp["$ref"] if "$ref" in resp else f"{op}/responses/{status}"
    return f"{at}/content/application~1json/schema"


def test_the_document_is_a_well_formed_openapi_3_1_document():
    doc = _doc()
    parsed = _Document.model_validate(doc)
    for path, item in parsed.paths.items():
        assert path.startswith("/") and set(item) <= set(METHODS), (path, set(item))
        for op in item.values():
            assert set(op.responses) <= {"200", "400", "404", "405", "409", "500"}, (path, op.responses)
            assert "200" in op.responses
    ids = [op.operationId for item in parsed.paths.values() for op in item.values()]
    assert len(ids) == len(set(ids)) == 9
    pointers = _schema_pointers(doc)
    assert len(pointers) > 20
    for p in pointers:  # every schema is a JSON Schema 2020-12 schema
        Draft202012Validator.check_schema(_pointer(doc, p))
    empty = [f"{at}/{k}" for at, node in _walk(doc) for k, v in node.items() if v is None]
    assert not empty, f"keys without a value (a comma in a flow mapping?): {empty}"
    refs = [node["$ref"] for _, node in _walk(doc) if isinstance(node.get("$ref"), str)]
    assert len(refs) > 30
    for ref in refs:  # every reference resolves to a component of this document
        assert ref.startswith("#/components/"), ref
        _pointer(doc, ref)
    used = {r.rsplit("/", 1)[1] for r in refs}
    unused = set(doc["components"]["schemas"]) | set(doc["components"]["responses"])
    assert not unused - used, f"components never referenced: {unused - used}"


def test_the_document_has_exactly_the_routes_the_server_dispatches_on():
    doc = _doc()
    documented = {(m.upper(), path) for path, item in doc["paths"].items() for m in item if m in METHODS}
    served = set(ROUTES)
    assert served, "the route table is empty"
    assert documented - served == set(), f"documented but not served: {sorted(documented - served)}"
    assert served - documented == set(), f"served but not documented: {sorted(served - documented)}"
    assert len(served) == 9


def test_the_schemas_refuse_what_the_controller_refuses():
    """The documented request schemas are not vacuous: they accept the clients' bodies and
    reject a few the controller answers 400."""
    doc = _doc()

    def body(path):
        return _validator(doc, f"#/paths/{path.replace('/', '~1')}/post/requestBody/content/application~1json/schema")

    conf = {"ocs0": [[[0, 0], [1, 1]]]}
    assert body("/configuration").is_valid({"configuration": conf, "reconfiguration_delay_s": 0.01})
    assert not body("/configuration").is_valid({"configuration": conf, "reconfiguration_delay_s": 601})
    assert not body("/configuration").is_valid({"configuration": {"ocs0": [[[0, 0]]]}})
    assert not body("/configuration").is_valid({"reconfiguration_delay_s": 0.01})
    assert body("/rotor").is_valid({"stop": True})
    assert body("/rotor").is_valid({"configurations": [conf], "slots_s": [0.01], "count": 3})
    assert not body("/rotor").is_valid({"configurations": [conf], "slots_s": [-1], "count": 3})
    assert body("/rotor").is_valid({"sequences": [[{"configuration": conf, "slot_s": 0.01}], []]})
    assert not body("/rotor").is_valid({"sequences": [[{"configuration": conf}]]})
    assert body("/failover").is_valid({"mode": "optical", "placement": [0, 1, 2], "spares": [3]})
    assert not body("/failover").is_valid({"mode": "teleport", "placement": [0, 1, 2], "spares": [3]})
    assert not body("/opus").is_valid({"socket": ""})
    assert body("/demand").is_valid({"events": [{"kind": "step-end", "name": "r", "demand": [[0, 1, 8]]}]})
    assert not body("/demand").is_valid({"events": [{"kind": "step-sideways", "name": "r"}]})
    assert not body("/demand").is_valid({"events": [{"kind": "step-end", "name": "r", "demand": [[0, 1]]}]})


def _call(port: int, method: str, target: str, body: dict | None = None) -> tuple[int, dict[str, str], object]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, target, body=None if body is None else json.dumps(body).encode(),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, dict(r.getheaders()), json.loads(data)


#: One real request per route and the status the controller (no switches connected) gives it.
CONF = {"ocs0": [[[0, 0], [1, 1]]]}
CASES = [
    ("GET", "/status", None, 200), ("GET", "/circuits", None, 200), ("GET", "/events?since=0", None, 200),
    ("GET", "/events?since=-1", None, 400),
    ("POST", "/prepare", {"configurations": [CONF]}, 200),
    ("POST", "/prepare", {"configurations": "ring"}, 400),
    ("POST", "/failover", {"mode": "optical", "placement": [0, 1, 2], "spares": [3]}, 200),
    ("POST", "/failover", {"disarm": True}, 200),
    ("POST", "/failover", {"mode": "optical", "placement": [0, 1, 9], "spares": [3]}, 400),
    ("POST", "/opus", {"socket": "{run_dir}/opus.sock", "reconfiguration_delay_s": 0.001}, 200),
    ("POST", "/opus", {"disarm": True}, 200),
    ("POST", "/opus", {"socket": 7}, 400),
    ("POST", "/configuration", {"configuration": "{circuits}"}, 200),  # unchanged: nothing to switch
    ("POST", "/configuration", {"configuration": CONF, "reconfiguration_delay_s": 0.001}, 409),  # OCS not connected
    ("POST", "/configuration", {"configuration": {"ocs0": [[[0, 0], [9, 0]]]}}, 400),
    ("POST", "/configuration", {"configuration": CONF, "reconfiguration_delay_s": 1e9}, 400),
    ("POST", "/rotor", {"configurations": ["{circuits}"], "slots_s": [0.01], "count": 1, "start_delay_s": 0.0}, 200),
    ("POST", "/rotor", {"stop": True}, 200),
    ("POST", "/rotor", {"sequences": [[{"configuration": {}, "slot_s": 0.01}]], "start_delay_s": 0.0}, 200),
    ("POST", "/rotor", {"stop": True}, 200),
    ("POST", "/rotor", {"sequences": [[{"configuration": {}, "slot_s": 0.01}]] * 3}, 400),
    ("POST", "/rotor", {"configurations": [CONF], "slots_s": [0.01]}, 400),
    ("POST", "/demand", {"events": [{"kind": "collective-begin", "name": "r", "collective": "allreduce",
                                     "algorithm": "ring", "bytes": 1024, "gpus": [0, 1, 2, 3], "steps": 1,
                                     "planner": "none", "owner": "app", "reconfiguration_delay_s": 0.0},
                                    {"kind": "step-begin", "name": "r", "step": 0, "steps": 1, "phase": "x",
                                     "demand": [[0, 1, 1024]]},
                                    {"kind": "step-end", "name": "r", "step": 0, "phase": "x",
                                     "demand": [[0, 1, 1024]], "time_s": 0.001, "end_s": 0.001},
                                    {"kind": "collective-end", "name": "r", "collective": "allreduce",
                                     "algorithm": "ring", "bytes": 1024, "gpus": [0, 1, 2, 3], "time_s": 0.001}]}, 200),
    ("POST", "/demand", {"events": [{"kind": "step-sideways", "name": "r"}]}, 400),
    ("POST", "/demand", {"events": "all of them"}, 400),
    ("GET", "/configuration", None, 405), ("POST", "/status", {}, 405), ("GET", "/nowhere", None, 404),
]


def test_the_controller_answers_every_route_as_documented(controller_process, run_dir):
    doc = _doc()
    _p, _ofp, api, client = controller_process(ocs_star(4, 2, 400, 0.0, "ring"),
                                               ["circuit_switch", "rotor", "parallel_ocs", "routing", "api", "failover", "opus"])
    circuits = client.circuits().to_json()
    seen: dict[tuple[str, str], set[int]] = {}
    for method, target, body, status in CASES:
        if body is not None:
            body = json.loads(json.dumps(body).replace('"{circuits}"', json.dumps(circuits))
                              .replace("{run_dir}", str(run_dir)))
        code, headers, answer = _call(api, method, target, body)
        assert code == status, (method, target, code, answer)
        path = target.split("?")[0]
        seen.setdefault((method, path), set()).add(code)
        if code == 404:
            assert path not in {p for _, p in ROUTES} and answer == {"error": f"no endpoint {path}"}
            continue
        if code == 405:
            allowed = sorted(m for m, p in ROUTES if p == path)
            assert headers["Allow"] == ", ".join(allowed) and method not in allowed
            method = allowed[0]
        errors = sorted(e.message for e in _validator(doc, _response_schema(doc, method, path, code))
                        .iter_errors(answer))
        assert not errors, (method, target, code, answer, errors)
        if code != 200:
            assert "\n" not in answer["error"] and len(answer["error"]) <= 320
    assert set(ROUTES) <= {k for k, codes in seen.items() if 200 in codes}, "a route never answered 200"
    assert _call(api, "POST", "/rotor", {"stop": True})[0] == 200
    print("answers by route:", {f"{m} {p}": sorted(c) for (m, p), c in sorted(seen.items())})


def test_a_running_rotor_refuses_a_second_one_with_409(controller_process):
    """A valid request the controller's state refuses is 409, not 400 or 500: a second rotor
    while one runs (two slots of 5 s of the configuration in place: the rotor runs at least
    5 s, far longer than a request takes); an app that is not loaded is 404."""
    doc = _doc()
    _p, _ofp, api, client = controller_process(ocs_star(4, 2, 400, 0.0, "ring"), ["circuit_switch", "rotor", "api"])
    rotor = {"configurations": [client.circuits().to_json()], "slots_s": [5.0], "count": 2, "start_delay_s": 0.0}
    assert _call(api, "POST", "/rotor", rotor)[0] == 200
    code, _, answer = _call(api, "POST", "/rotor", rotor)
    assert code == 409 and answer == {"error": "a rotor is already running"}, (code, answer)
    assert _validator(doc, _response_schema(doc, "POST", "/rotor", 409)).is_valid(answer)
    code, _, answer = _call(api, "POST", "/failover", {"disarm": True})
    assert code == 404 and answer == {"error": "the FailoverApp app is not loaded: this endpoint is not served"}
    assert _validator(doc, _response_schema(doc, "POST", "/failover", 404)).is_valid(answer)
