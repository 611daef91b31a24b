"""The REST API over HTTP: a token on every request, and each way a call can go wrong turned into
one line and an exit code."""

import re

import requests

from . import __version__
from .errors import AUTH, NOT_FOUND, REJECTED, SERVER_ERROR, UNREACHABLE, CliError

PAGE_SIZE = 500  # the API's largest page


class Api:
    def __init__(self, settings, timeout=30.0):
        self.settings = settings
        self.base = settings.url
        self.timeout = timeout
        self.session = requests.Session()
        self.session.headers.update({"Accept": "application/json", "User-Agent": f"jobsctl/{__version__}"})

    def get(self, path, params=None, not_found=None):
        return self.request("GET", path, params=params, not_found=not_found)

    def post(self, path, body=None, not_found=None, rejected=None):
        return self.request("POST", path, body=body, not_found=not_found, rejected=rejected)

    def upload(self, path, data, content_type, params=None, not_found=None, rejected=None):
        """POST ``data`` (bytes) as the body, of ``content_type`` (an ICS file to a calendar)."""
        return self.request("POST", path, params=params, data=data, content_type=content_type, not_found=not_found,
                            rejected=rejected)

    def delete(self, path, not_found=None):
        return self.request("DELETE", path, not_found=not_found)

    def get_all(self, path, params=None, limit=None):
        """Every item of a paginated list (at most ``limit``), following its ``next`` links."""
        params = {**(params or {}), "page_size": min(limit or PAGE_SIZE, PAGE_SIZE)}
        answer = self.get(path, params)
        items = list(answer["results"])
        while answer.get("next") and (limit is None or len(items) < limit):
            answer = self.request("GET", answer["next"])
            items += answer["results"]
        return items[:limit] if limit else items

    def named(self, path, ref, noun, listed_by):
        """The {noun} of the collection ``path`` named ``ref``, or whose id it is when none has that
        name; not found, the error says which command (``listed_by``) lists them."""
        found = self.get(path, {"name": ref})["results"]
        if found:
            return found[0]
        missing = f"no {noun} named {ref!r}" + (f" and no {noun} {ref}" if ref.isdigit() else "") + \
            f" (or it is not yours to see); {listed_by}."
        if not ref.isdigit():
            raise CliError(NOT_FOUND, missing)
        return self.get(f"{path}{ref}/", not_found=missing)

    def request(self, method, path, params=None, body=None, not_found=None, rejected=None, data=None,
                content_type=None):
        """The answer's JSON. ``not_found``: the message for a 404; ``rejected(answer)``: a hook
        for a 400 whose JSON the caller shows itself (it may raise)."""
        settings = self.settings
        if not settings.token:
            raise CliError(AUTH, f"no token: set JOBSCTL_TOKEN, or token in {settings.config_path} "
                                 "(make one on the pages' API tokens page, or with manage.py tokens create USER).")
        url = path if path.startswith(("http://", "https://")) else f"{self.base}{path}"
        try:
            headers = {"Authorization": f"Token {settings.token}"}
            if content_type:
                headers["Content-Type"] = content_type
            response = self.session.request(method, url, params=params, json=body, data=data, timeout=self.timeout,
                                            headers=headers)
        except requests.Timeout:
            raise CliError(UNREACHABLE, f"{self.base} did not answer within {self.timeout:g} s.") from None
        except requests.RequestException as exc:
            raise CliError(UNREACHABLE, f"cannot reach {self.base}: {reason(exc)}.") from None
        status = response.status_code
        answer = json_of(response)
        if status == 401:
            raise CliError(AUTH, f"the server refused the token from {settings.token_from}: {detail(answer)}")
        if status == 403:
            raise CliError(AUTH, f"not allowed: {detail(answer)}")
        if status == 429:
            text = detail(answer) if isinstance(answer, dict) else response.text.strip()[:200]
            if "Retry-After" in response.headers:  # too many refused tokens from this address: locked out
                raise CliError(AUTH, f"the server refused the token from {settings.token_from}: {text}")
            raise CliError(AUTH, f"refused: {text}")  # over a quota of runs, or a rate (test sends)
        if status == 404:
            raise CliError(NOT_FOUND, not_found or f"not found: {method} {path}")
        if status in (400, 409, 413):
            if rejected is not None and isinstance(answer, dict):
                rejected(answer)
            raise CliError(REJECTED, f"refused: {detail(answer)}")
        if status >= 500 or not 200 <= status < 300:
            raise CliError(SERVER_ERROR, f"{self.base} failed: HTTP {status} for {method} {path}.")
        if status == 204:
            return None
        if answer is None:
            kind = response.headers.get("Content-Type", "no content type")
            raise CliError(SERVER_ERROR, f"{self.base} answered {kind}, not the job scheduler's API: is the URL "
                                         f"right (from {settings.url_from})?")
        return answer


def json_of(response):
    try:
        return response.json()
    except ValueError:
        return None


def reason(exc):
    """The cause of a failed connection in a few words (requests nests it deep in its message)."""
    found = re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", str(exc))
    if found:
        return found.group(1).strip().rstrip(".").lower()
    return type(exc).__name__


def detail(answer):
    """An error answer in one line: DRF's ``detail``, or each field's messages."""
    if not isinstance(answer, dict):
        return "no details."
    if isinstance(answer.get("detail"), str) and len(answer) == 1:
        return answer["detail"]
    return "; ".join(f"{key}: {text}" if key else text for key, text in flat(answer))


def flat(value, prefix=""):
    if isinstance(value, dict):
        for key, inner in value.items():
            name = key if key not in ("non_field_errors", "detail") else ""
            yield from flat(inner, f"{prefix}.{name}" if prefix and name else prefix or name)
    elif isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        yield prefix, " ".join(value)
    elif isinstance(value, list):
        for item in value:
            yield from flat(item, prefix)
    else:
        yield prefix, str(value)
