"""Who changed a user, a group or a permission: Django's signals name the row, not the person, so the
request in progress is kept for the handlers (``audit.people``) to name its user."""

from . import trail


class ActorMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with trail.during(request):
            return self.get_response(request)
