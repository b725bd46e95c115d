"""Helpers for the capture tests: real requests and responses captured from real servers."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).with_name("data")
REQUESTS = DATA / "requests"


def request(name: str) -> tuple[str, str, list[tuple[str, str]], bytes]:
    """(method, url, headers, body) of a captured ``*.request.txt``."""
    text = (REQUESTS / name).read_bytes()
    head, _, body = text.partition(b"\n\n")
    lines = head.decode().splitlines()
    method, url = lines[0].split(" ", 1)
    headers = []
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers.append((k.strip(), v.strip()))
    return method, url, headers, body.rstrip(b"\n")


def response_body(name: str) -> tuple[list[tuple[str, str]], bytes]:
    """(headers, body) of a captured ``.sse``/``.json`` response (the head is optional)."""
    data = (DATA / name).read_bytes()
    if data.startswith(b"HTTP/"):
        head, _, body = data.partition(b"\r\n\r\n") if b"\r\n\r\n" in data[:2000] else data.partition(b"\n\n")
        lines = head.decode().splitlines()[1:]
        headers = [(k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in lines)]
        return headers, body
    return [], data
