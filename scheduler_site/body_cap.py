"""The largest request body the site reads, REQUEST_BODY_MAX_BYTES: a larger one is answered 413
before anything reads it. Django caps a form's fields (DATA_UPLOAD_MAX_MEMORY_SIZE) but streams an
uploaded file of any size to disk, and the CSRF check parses a form before any view runs; a body
without a Content-Length is not read at all (the WSGI server hands it over as empty)."""

from django.conf import settings
from django.http import HttpResponse


def too_large(request, limit):
    """The 413 for a request whose declared body is larger than ``limit`` bytes, or None."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return HttpResponse("Content-Length is not a number.\n", status=400, content_type="text/plain")
    if length <= limit:
        return None
    return HttpResponse(f"The request body is {length} bytes; at most {limit} (REQUEST_BODY_MAX_BYTES).\n",
                        status=413, content_type="text/plain")


PINGS = "/ping/"  # check-ins' pings (jobs.api.pings)


class BodyCap:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path_info.startswith(PINGS):
            return self.get_response(request)  # reads its first JOBS_PING_BODY_BYTES only: cut, never refused
        return too_large(request, settings.REQUEST_BODY_MAX_BYTES) or self.get_response(request)
