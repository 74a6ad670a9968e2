"""The MongoDB Java driver 2.13 (legacy opcodes) against the real server (issue 26): find, a
2,500-document cursor, findOne, sort/skip/limit with a projection, update, remove,
unacknowledged OP_INSERT/OP_UPDATE/OP_DELETE with getLastError, and an error that must
raise. Skipped, saying why, where there is no JDK or the driver cannot be fetched from
Maven Central."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

VERSION = "2.13.3"
HERE = Path(__file__).resolve().parent
JAR = (
    Path.home()
    / ".m2/repository/org/mongodb/mongo-java-driver"
    / VERSION
    / f"mongo-java-driver-{VERSION}.jar"
)


def driver_jar() -> Path:
    if not JAR.exists() and shutil.which("mvn"):
        subprocess.run(
            ["mvn", "-q", "-B", "dependency:get", f"-Dartifact=org.mongodb:mongo-java-driver:{VERSION}"],
            capture_output=True,
            timeout=300,
        )
    if not JAR.exists():
        pytest.skip(f"mongo-java-driver {VERSION} is not in ~/.m2 and could not be fetched")
    return JAR


def test_java_driver_2_13(shared_server, tmp_path):
    if not (shutil.which("javac") and shutil.which("java")):
        pytest.skip("no JDK on this machine")
    jar = driver_jar()
    subprocess.run(
        ["javac", "-nowarn", "-cp", str(jar), "-d", str(tmp_path), str(HERE / "java/LegacyJava.java")],
        check=True,
        capture_output=True,
        timeout=300,
    )
    classpath = os.pathsep.join([str(tmp_path), str(jar)])
    run = subprocess.run(
        ["java", "-cp", classpath, "LegacyJava", str(shared_server.port)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().endswith("OK")
