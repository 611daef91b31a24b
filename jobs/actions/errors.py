"""``ActionError``: an action refused, with a message meant for the person who acted."""

from django.core.exceptions import NON_FIELD_ERRORS


class ActionError(Exception):
    """An action refused: ``kind`` says why (invalid input, forbidden, a conflict with other data, too
    many runs: a run quota), ``fields`` the messages per field of an invalid input. Each interface
    answers it its own way (the API: 400, 403, 409 or 429)."""

    INVALID, FORBIDDEN, CONFLICT, TOO_MANY = "invalid", "forbidden", "conflict", "too_many"

    def __init__(self, message, kind=INVALID, fields=None):
        super().__init__(message)
        self.message, self.kind = message, kind
        self.fields = fields or {NON_FIELD_ERRORS: [message]}

    @classmethod
    def invalid(cls, exc):
        """From Django's ValidationError (the model's or a range's checks)."""
        fields = exc.message_dict if hasattr(exc, "error_dict") else {NON_FIELD_ERRORS: exc.messages}
        message = "; ".join(" ".join(messages) if name == NON_FIELD_ERRORS else f"{name}: {' '.join(messages)}"
                            for name, messages in fields.items())
        return cls(message, cls.INVALID, fields)
