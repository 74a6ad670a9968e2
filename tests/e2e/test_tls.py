"""TLS with pymongo against the real binary (issue 25, item 4): certificates made in the test
with the `openssl` CLI (a CA, a server certificate for 127.0.0.1, client certificates from
that CA and from another); `--tlsMode requireTLS` refuses a plain-text client and serves a
TLS one (SCRAM over it too); `preferTLS` and `allowTLS` serve both, told apart by the first
bytes; `--tlsCAFile` makes clients present a certificate from that CA unless
`--tlsAllowConnectionsWithoutCertificates`; `net.tls.*` in a configuration file; bad TLS
options stop the server with one line."""

import shutil
import subprocess
from pathlib import Path

import pytest
from pymongo import MongoClient
from pymongo.errors import ConnectionFailure, OperationFailure, ServerSelectionTimeoutError

from conftest import Server, free_port, shale_binary

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI")


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d: Path, name: str) -> None:
    openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=d,
    )


def make_leaf(d: Path, name: str, ca: str, subject: str, extensions: str) -> Path:
    openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=d,
    )
    (d / f"{name}.ext").write_text(extensions)
    openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d,
    )
    pem = d / f"{name}.pem"
    pem.write_text((d / f"{name}.crt").read_text() + (d / f"{name}.key").read_text())
    return pem


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    make_ca(d, "ca")
    make_ca(d, "rogue")
    server = make_leaf(
        d, "server", "ca", "/CN=localhost",
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
    )
    client = make_leaf(
        d, "client", "ca", "/C=US/O=Shale/OU=Tests/CN=client",
        "extendedKeyUsage=clientAuth\n",
    )
    rogue_client = make_leaf(d, "rogue_client", "rogue", "/CN=rogue", "extendedKeyUsage=clientAuth\n")
    return {"dir": d, "ca": d / "ca.pem", "server": server, "client": client, "rogue_client": rogue_client}


def tls_client(srv: Server, certs, cert: Path | None = None, **kwargs) -> MongoClient:
    extra = {"tlsCertificateKeyFile": str(cert)} if cert else {}
    return MongoClient(
        f"mongodb://127.0.0.1:{srv.port}/?directConnection=true",
        tls=True,
        tlsCAFile=str(certs["ca"]),
        serverSelectionTimeoutMS=3000,
        **extra,
        **kwargs,
    )


def plain_client(srv: Server) -> MongoClient:
    return MongoClient(srv.uri, serverSelectionTimeoutMS=2000)


def works(client: MongoClient) -> bool:
    try:
        with client:
            client.admin.command("ping")
        return True
    except (ServerSelectionTimeoutError, ConnectionFailure):
        return False


def test_require_tls_serves_tls_and_refuses_plain_text(tmp_path, certs):
    srv = Server(
        tmp_path / "data",
        args=["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", str(certs["server"]), "--auth"],
    )
    try:
        assert not works(plain_client(srv))
        assert "only accepts TLS connections" in srv.read_log()
        with tls_client(srv, certs) as c:
            c.admin.command("createUser", "ann", pwd="pw", roles=["root"])  # localhost exception
        uri = f"mongodb://ann:pw@127.0.0.1:{srv.port}/?directConnection=true&authSource=admin"
        with MongoClient(uri, tls=True, tlsCAFile=str(certs["ca"]), serverSelectionTimeoutMS=3000) as c:
            c.app.c.insert_many([{"i": i, "pad": "x" * 1000} for i in range(2000)])
            assert c.app.c.count_documents({}) == 2000
            assert len(list(c.app.c.find().batch_size(100))) == 2000
            info = c.admin.command("connectionStatus")["authInfo"]
            assert info["authenticatedUsers"] == [{"user": "ann", "db": "admin"}]
        # A client that trusts another CA does not accept the server's certificate.
        rogue = MongoClient(
            f"mongodb://127.0.0.1:{srv.port}/?directConnection=true",
            tls=True, tlsCAFile=str(certs["dir"] / "rogue.pem"), serverSelectionTimeoutMS=2000,
        )
        assert not works(rogue)
    finally:
        srv.stop()


@pytest.mark.parametrize("mode", ["preferTLS", "allowTLS"])
def test_prefer_and_allow_serve_both(tmp_path, certs, mode):
    srv = Server(
        tmp_path / "data",
        args=["--tlsMode", mode, "--tlsCertificateKeyFile", str(certs["server"])],
    )
    try:
        with plain_client(srv) as plain, tls_client(srv, certs) as tls:
            plain.t.c.insert_one({"from": "plain", "pad": "y" * 5000})
            tls.t.c.insert_one({"from": "tls"})
            assert sorted(d["from"] for d in plain.t.c.find()) == ["plain", "tls"]
            assert sorted(d["from"] for d in tls.t.c.find()) == ["plain", "tls"]
    finally:
        srv.stop()


def test_a_ca_file_requires_client_certificates_from_that_ca(tmp_path, certs):
    srv = Server(
        tmp_path / "data",
        args=[
            "--tlsMode", "requireTLS", "--tlsCertificateKeyFile", str(certs["server"]),
            "--tlsCAFile", str(certs["ca"]),
        ],
    )
    try:
        assert works(tls_client(srv, certs, certs["client"]))
        assert not works(tls_client(srv, certs))
        assert not works(tls_client(srv, certs, certs["rogue_client"]))
    finally:
        srv.stop()


def test_connections_without_certificates_may_be_allowed_from_the_config_file(tmp_path, certs):
    conf = tmp_path / "shale.conf"
    port = free_port()
    conf.write_text(
        f"storage:\n  dbPath: {tmp_path / 'data'}\n"
        f"net:\n  port: {port}\n  tls:\n    mode: requireTLS\n"
        f"    certificateKeyFile: {certs['server']}\n    CAFile: {certs['ca']}\n"
        "    allowConnectionsWithoutCertificates: true\n"
    )
    srv = Server(tmp_path / "data", port=port, args=["--config", str(conf)], defaults=False)
    try:
        assert works(tls_client(srv, certs))
        assert works(tls_client(srv, certs, certs["client"]))
        # One it does present must still verify.
        assert not works(tls_client(srv, certs, certs["rogue_client"]))
        assert not works(plain_client(srv))
        with tls_client(srv, certs) as c:
            parsed = c.admin.command("getCmdLineOpts")["parsed"]
        assert parsed["net"]["tls"]["mode"] == "requireTLS"
    finally:
        srv.stop()


@pytest.mark.parametrize(
    "args,message",
    [
        (["--tlsMode", "requireTLS"], "needs tlsCertificateKeyFile"),
        (["--tlsMode", "requireSSL"], "net.tls.mode must be one of"),
        (["--tlsCAFile", "/nowhere/ca.pem"], "tlsMode is disabled"),
        (["--tlsMode", "preferTLS", "--tlsCertificateKeyFile", "/nowhere/s.pem"], "cannot read /nowhere/s.pem"),
    ],
)
def test_bad_tls_options_stop_the_server_with_one_line(tmp_path, args, message):
    run = subprocess.run(
        [shale_binary(), "serve", "--dbpath", str(tmp_path / "data"), "--port", str(free_port()), *args],
        capture_output=True, text=True, timeout=30,
    )
    assert run.returncode == 1
    errors = [line for line in run.stderr.splitlines() if message in line]
    assert len(errors) == 1, run.stderr


def subject_of(cert: Path) -> str:
    out = subprocess.run(
        ["openssl", "x509", "-in", str(cert), "-noout", "-subject", "-nameopt", "RFC2253"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    return out.removeprefix("subject=")


def test_x509_logs_the_certificate_subject_in_as_an_external_user(tmp_path, certs):
    subject = subject_of(certs["client"])
    assert subject == "CN=client,OU=Tests,O=Shale,C=US"
    srv = Server(
        tmp_path / "data",
        args=[
            "--auth", "--tlsMode", "requireTLS", "--tlsCertificateKeyFile", str(certs["server"]),
            "--tlsCAFile", str(certs["ca"]), "--tlsAllowConnectionsWithoutCertificates",
        ],
    )
    try:
        with tls_client(srv, certs) as c:
            c.admin.command("createUser", "root", pwd="pw", roles=["root"])
        root_uri = f"mongodb://root:pw@127.0.0.1:{srv.port}/?directConnection=true&authSource=admin"
        with MongoClient(root_uri, tls=True, tlsCAFile=str(certs["ca"]), serverSelectionTimeoutMS=3000) as root:
            root["$external"].command("createUser", subject, roles=[{"role": "read", "db": "app"}])
            root.app.c.insert_one({"x": 1})
        x509_uri = f"mongodb://127.0.0.1:{srv.port}/?directConnection=true&authMechanism=MONGODB-X509"
        with MongoClient(
            x509_uri, tls=True, tlsCAFile=str(certs["ca"]),
            tlsCertificateKeyFile=str(certs["client"]), serverSelectionTimeoutMS=3000,
        ) as c:
            assert c.app.c.find_one({}, {"_id": 0}) == {"x": 1}
            info = c.admin.command("connectionStatus")["authInfo"]
            assert info["authenticatedUsers"] == [{"user": subject, "db": "$external"}]
            with pytest.raises(OperationFailure) as e:
                c.app.c.insert_one({"x": 2})
            assert e.value.code == 13
        # The authenticate command itself, without the driver's speculative handshake.
        with tls_client(srv, certs, certs["client"]) as c:
            reply = c["$external"].command("authenticate", 1, mechanism="MONGODB-X509")
            assert (reply["dbname"], reply["user"]) == ("$external", subject)
            with pytest.raises(OperationFailure) as e:
                c["$external"].command("authenticate", 1, mechanism="MONGODB-X509", user="CN=someone")
            assert e.value.code == 18
            with pytest.raises(OperationFailure) as e:
                c.admin.command("authenticate", 1, mechanism="MONGODB-X509")
            assert e.value.code == 17
        # Without a certificate there is no subject to log in as.
        with tls_client(srv, certs) as c:
            with pytest.raises(OperationFailure) as e:
                c["$external"].command("authenticate", 1, mechanism="MONGODB-X509")
            assert e.value.code == 18
    finally:
        srv.stop()


def test_x509_logins_meet_the_users_authentication_restrictions(tmp_path, certs):
    subject = subject_of(certs["client"])
    srv = Server(
        tmp_path / "data",
        args=[
            "--auth", "--tlsMode", "requireTLS", "--tlsCertificateKeyFile", str(certs["server"]),
            "--tlsCAFile", str(certs["ca"]), "--tlsAllowConnectionsWithoutCertificates",
        ],
    )
    try:
        with tls_client(srv, certs) as c:
            c.admin.command("createUser", "root", pwd="pw", roles=["root"])
        root_uri = f"mongodb://root:pw@127.0.0.1:{srv.port}/?directConnection=true&authSource=admin"
        with MongoClient(root_uri, tls=True, tlsCAFile=str(certs["ca"]), serverSelectionTimeoutMS=3000) as root:
            root["$external"].command(
                "createUser", subject, roles=[],
                authenticationRestrictions=[{"clientSource": ["10.0.0.0/8"]}],
            )
            with tls_client(srv, certs, certs["client"]) as c:
                with pytest.raises(OperationFailure) as e:
                    c["$external"].command("authenticate", 1, mechanism="MONGODB-X509")
                assert e.value.code == 18
            root["$external"].command(
                "updateUser", subject, authenticationRestrictions=[{"clientSource": ["127.0.0.1"]}],
            )
            with tls_client(srv, certs, certs["client"]) as c:
                reply = c["$external"].command("authenticate", 1, mechanism="MONGODB-X509")
                assert reply["user"] == subject
        assert "unmet authentication restrictions" in srv.read_log()
    finally:
        srv.stop()
