"""Shared paths: the repository's fixtures, made by the real tools (see
fixtures/README.md)."""

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def moto():
    """An S3 server (moto's, run by the system's python3) on loopback, with
    the environment pparse reads S3 settings from; yields
    ``upload(path, key) -> "s3://bucket/key"``. Skips when moto is not
    installed."""
    probe = subprocess.run(
        ["python3", "-c", "import moto.server, boto3"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        pytest.skip("moto is not installed for python3: pip install 'moto[server]'")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        ["python3", "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
    }
    old = {k: os.environ.get(k) for k in env}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, "moto exited"
                assert time.monotonic() < deadline, "moto did not listen within 60 s"
                time.sleep(0.05)
        client = (
            "import boto3, sys\n"
            f"s3 = boto3.client('s3', endpoint_url='{endpoint}', aws_access_key_id='test',"
            " aws_secret_access_key='test', region_name='us-east-1')\n"
        )
        subprocess.run(["python3", "-c", client + "s3.create_bucket(Bucket='pparse-test')"], check=True)
        os.environ.update(env)

        def upload(path: Path, key: str) -> str:
            subprocess.run(
                ["python3", "-c", client + "s3.upload_file(sys.argv[1], 'pparse-test', sys.argv[2])", str(path), key],
                check=True,
            )
            return f"s3://pparse-test/{key}"

        yield upload
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.kill()
        server.wait()
