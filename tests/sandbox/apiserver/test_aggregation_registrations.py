"""kube-aggregator's orderings and the Service half of its availability check (pure), and the proxy's lean
HTTP client against a bare TLS server."""

from __future__ import annotations

from typing import Any

from kaiwo_sandbox.apiserver.aggregation import registrations
from kaiwo_sandbox.apiserver.aggregation.proxy import forwarded_headers, identity_headers
from kaiwo_sandbox.apiserver.auth.authn import UserInfo


def _apiservice(group: str, version: str, group_priority: int, version_priority: int) -> dict[str, Any]:
    return {"metadata": {"name": f"{version}.{group}"},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": group_priority,
                     "versionPriority": version_priority, "service": {"namespace": "ns", "name": "svc", "port": 443}}}


def test_versions_sort_kube_like() -> None:
    versions = ["v11alpha2", "foo1", "v10", "v1", "v3beta1", "v12alpha1", "v2", "v10beta3", "foo10", "v11beta2"]
    assert sorted(versions, key=registrations.version_key) == [
        "v10", "v2", "v1", "v11beta2", "v10beta3", "v3beta1", "v12alpha1", "v11alpha2", "foo1", "foo10"]


def test_groups_by_priority_then_name_and_versions_by_priority() -> None:
    services = [_apiservice("b.io", "v1", 100, 10), _apiservice("a.io", "v1", 100, 10),
                _apiservice("z.io", "v1beta1", 1000, 10), _apiservice("z.io", "v1", 1000, 5),
                _apiservice("apps", "v1", 17800, 15)]
    groups = registrations.aggregated_groups(services, local={"apps"})
    assert [g["name"] for g in groups] == ["z.io", "a.io", "b.io"]
    assert [v["version"] for v in groups[0]["versions"]] == ["v1beta1", "v1"]
    assert groups[0]["preferredVersion"] == {"groupVersion": "z.io/v1beta1", "version": "v1beta1"}


def test_the_service_and_endpoints_decide_where_the_check_goes() -> None:
    target = registrations.backend(_apiservice("x.io", "v1", 100, 100))
    assert target is not None and target.server_name == "svc.ns.svc"
    service = {"spec": {"ports": [{"name": "https", "port": 443}]}}
    assert registrations.endpoint(target, None, None) == ("ServiceNotFound", 'service/svc in "ns" is not present')
    assert registrations.endpoint(target, {"spec": {"ports": [{"port": 80}]}}, None) == (
        "ServicePortError", 'service/svc in "ns" is not listening on port 443')
    assert registrations.endpoint(target, service, None) == (
        "EndpointsNotFound", 'cannot find endpoints for service/svc in "ns"')
    wrong_port = {"subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"name": "http", "port": 8443}]}]}
    assert registrations.endpoint(target, service, wrong_port) == (
        "MissingEndpoints", 'endpoints for service/svc in "ns" have no addresses with port name "https"')
    good = {"subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"name": "https", "port": 8443}]}]}
    assert registrations.endpoint(target, service, good) == ("10.0.0.1", 8443)


def test_the_transition_time_moves_only_with_the_status() -> None:
    first = registrations.condition("False", "ServiceNotFound", "m", "t1", None)
    same = registrations.condition("False", "EndpointsNotFound", "m2", "t2", first)
    flipped = registrations.condition("True", "Passed", "all checks passed", "t3", same)
    assert (first["lastTransitionTime"], same["lastTransitionTime"], flipped["lastTransitionTime"]) == ("t1", "t1", "t3")


def test_the_caller_is_named_in_headers_and_what_the_client_sent_as_identity_is_dropped() -> None:
    user = UserInfo("alice", ("devs", "system:authenticated"), extra=(("example.com/team", ("x", "y")),))
    assert identity_headers(user) == [
        ("X-Remote-User", "alice"), ("X-Remote-Group", "devs"), ("X-Remote-Group", "system:authenticated"),
        ("X-Remote-Extra-example.com%2Fteam", "x"), ("X-Remote-Extra-example.com%2Fteam", "y")]
    incoming = [("Authorization", "Bearer t"), ("X-Remote-User", "admin"), ("x-remote-group", "system:masters"),
                ("Impersonate-User", "root"), ("Accept", "application/json"), ("Host", "h")]
    assert forwarded_headers(incoming, UserInfo("bob")) == [("Accept", "application/json"), ("X-Remote-User", "bob")]


def test_the_lean_upstream_reads_lengths_and_chunks_and_reuses_connections() -> None:
    """upstream.py against a plain asyncio TLS server answering by Content-Length, then chunked."""
    import asyncio
    import ssl
    import tempfile
    from pathlib import Path

    from kaiwo_sandbox.apiserver.aggregation.upstream import Upstream
    from kaiwo_sandbox.apiserver.tls import generate

    cert = generate()
    accepted: list[int] = []
    answers = [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nWarning: 299 - \"a\"\r\nWarning: 299 - \"b\"\r\n\r\nhello",
               b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\n"]

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        for answer in answers:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(answer)
            await writer.drain()
        writer.close()

    async def run() -> list[tuple[int, list[tuple[str, str]], bytes]]:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "c").write_bytes(cert.cert_pem)
            (Path(tmp) / "k").write_bytes(cert.key_pem)
            server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            server_context.load_cert_chain(Path(tmp) / "c", Path(tmp) / "k")
        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_context)
        port = server.sockets[0].getsockname()[1]
        client_context = ssl.create_default_context(cadata=cert.cert_pem.decode())
        upstream = Upstream()
        try:
            return [await upstream.request("127.0.0.1", port, client_context, "localhost", "GET", f"/{i}",
                                           [("Host", "localhost")], None, 10) for i in range(2)]
        finally:
            upstream.close()
            server.close()

    first, second = asyncio.run(run())
    assert first == (200, [("Content-Length", "5"), ("Warning", '299 - "a"'), ("Warning", '299 - "b"')], b"hello")
    assert (second[0], second[2]) == (404, b"abcde")
    assert len(accepted) == 1  # the second request reused the first's connection
