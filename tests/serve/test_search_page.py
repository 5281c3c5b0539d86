"""The search page finds kernels by name, description, backend and torch version among
the repositories the caller may read (the listing's rule), with ``list_models``'
``author`` filter; bad parameters are a 400 page, never a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from huggingface_hub import HfApi
from served import READ_TOKEN, WRITE_TOKEN, serving
from team_hub import PUBLIC, SECRET, publish_team_kernels

HTML = {"accept": "text/html"}


def _found(url: str, token: str | None = None, **query: str) -> list[str]:
    headers = dict(HTML)
    if token:
        headers["authorization"] = f"Bearer {token}"
    page = httpx.get(f"{url}/-/search", params=query, headers=headers)
    assert page.status_code == 200, page.text
    return re.findall(r'<a class="repo" href="/kernels/([^"]+)">', page.text)


def test_search_matches_name_description_backend_and_torch(hub: Path, tokens_file: Path,
                                                           tmp_path: Path) -> None:
    from kernelhub_builder.ship import LocalPublisher
    from kernelhub_serve.tokens import TokenTable
    from kh_doubles import make_variant

    with serving(hub, TokenTable.load(tokens_file)) as url:
        publish_team_kernels(hub, tmp_path, url)
        variants = {}
        for name in ("torch213-cxx11-cu130-x86_64-linux", "torch-stable-abi212-cpu-x86_64-linux"):
            variants[name] = tmp_path / "rms" / name
            make_variant(variants[name], name="rmsnorm")
        LocalPublisher(hub).publish("kernels-community/rmsnorm", "v1", variants, tag="v1.0.0",
                                    message="release")
        HfApi(endpoint=url, token=WRITE_TOKEN).upload_file(
            path_or_fileobj=b"---\nlicense: apache-2.0\n---\n# rmsnorm\n\n![badge](b.svg)\n\n"
                            b"Fused RMS normalisation\nfor <decoders>.\n\nMore text.\n",
            path_in_repo="README.md", repo_id="kernels-community/rmsnorm", repo_type="kernel",
            revision="v1")

        everything = _found(url)
        assert everything == ["acme/public", "kernels-community/rmsnorm"]
        assert _found(url, READ_TOKEN) == [PUBLIC, SECRET, "kernels-community/rmsnorm"]
        assert _found(url, q="normalisation decoders") == ["kernels-community/rmsnorm"]
        assert _found(url, q="RMS") == ["kernels-community/rmsnorm"]
        assert _found(url, q="normalisation public") == []  # every word must match
        assert _found(url, q="secret") == []  # never what the caller may not read
        assert _found(url, READ_TOKEN, q="secret") == [SECRET]
        assert _found(url, READ_TOKEN, author="acme") == [PUBLIC, SECRET]
        assert _found(url, author="kernels-community") == ["kernels-community/rmsnorm"]
        # universal variants load on every backend and torch; the rest as named
        assert _found(url, backend="cuda") == everything
        assert _found(url, backend="metal") == ["acme/public"]
        assert _found(url, torch="2.13") == everything  # cu130 for 2.13, stable ABI ≥ 2.12
        assert _found(url, torch="2.11") == ["acme/public"]
        assert _found(url, q="cu130", torch="2.14") == ["kernels-community/rmsnorm"]  # ABI
        assert _found(url, q="cu130", torch="2.14", backend="rocm") == []

        page = httpx.get(f"{url}/-/search", params={"q": "<script>"}, headers=HTML).text
        assert "&lt;script&gt;" in page and "<script>" not in page
        rms = httpx.get(f"{url}/-/search", params={"q": "rms"}, headers=HTML).text
        assert "Fused RMS normalisation for &lt;decoders&gt;." in rms
        assert "cpu, cuda · torch 2.13, ≥2.12 · 2 variants · 0 downloads" in rms
        index = httpx.get(f"{url}/", headers=HTML).text
        assert "Fused RMS normalisation" in index  # the index shows the same description

        for query in ({"backend": "tpu"}, {"q": "x" * 201}, {"torch": "2.13\n"}):
            answer = httpx.get(f"{url}/-/search", params=query, headers=HTML)
            assert answer.status_code == 400 and "<h1>400</h1>" in answer.text, query
