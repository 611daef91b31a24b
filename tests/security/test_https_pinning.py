"""HTTPS through the guard: the connection goes to the checked address while the name is what TLS
verifies (server name and certificate), so pinning the address takes nothing from HTTPS."""

import socket
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import outbound

NAME = "pinned.example.invalid"


@pytest.fixture
def tls_server(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={NAME}",
                    "-addext", f"subjectAltName=DNS:{NAME}", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers["Host"])
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.2", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_port, str(cert), seen
    server.shutdown()
    server.server_close()


def resolver(address):
    def resolve(host, port, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
    return resolve


def test_https_to_a_pinned_address_verifies_the_name(tls_server):
    port, cert, seen = tls_server
    policy = outbound.Policy(allowed_networks=outbound.parse_networks(["127.0.0.2/32"]), resolve=resolver("127.0.0.2"),
                             ca_certs=cert)
    response = outbound.fetch("GET", f"https://{NAME}:{port}/", policy=policy)
    assert (response.status, response.body, response.address) == (200, b"ok", "127.0.0.2")
    assert seen == [f"{NAME}:{port}"]


def test_https_with_a_certificate_for_another_name_fails(tls_server):
    port, cert, seen = tls_server
    policy = outbound.Policy(allowed_networks=outbound.parse_networks(["127.0.0.2/32"]), resolve=resolver("127.0.0.2"),
                             ca_certs=cert)
    with pytest.raises(outbound.RequestFailed):
        outbound.fetch("GET", f"https://other.example.invalid:{port}/", policy=policy)
    assert seen == []


def test_https_to_an_internal_address_is_refused_before_connecting(tls_server):
    port, cert, seen = tls_server
    policy = outbound.Policy(resolve=resolver("127.0.0.2"), ca_certs=cert)
    with pytest.raises(outbound.Refused):
        outbound.fetch("GET", f"https://{NAME}:{port}/", policy=policy)
    assert seen == []
