"""The sign-on's two addresses: /oidc/authenticate/ sends the browser to the provider, /oidc/callback/
takes it back. Both answer 404 while single sign-on is off. A callback that cannot sign anyone on
(declined, replayed, tampered with, the provider unreachable) answers a page saying so, never a 500."""

import logging

import jwt
import requests
from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import Http404
from django.shortcuts import render
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from .accounts import SignOnRefused

log = logging.getLogger(__name__)


def failed(request, message, status):
    return render(request, "sso/failed.html", {"message": message, "provider": settings.OIDC_PROVIDER_NAME},
                  status=status)


class Authenticate(OIDCAuthenticationRequestView):
    def dispatch(self, request, *args, **kwargs):
        if not settings.OIDC_ENABLED:
            raise Http404("single sign-on is off")
        return super().dispatch(request, *args, **kwargs)


class Callback(OIDCAuthenticationCallbackView):
    def dispatch(self, request, *args, **kwargs):
        if not settings.OIDC_ENABLED:
            raise Http404("single sign-on is off")
        return super().dispatch(request, *args, **kwargs)

    def get(self, request):
        try:
            return super().get(request)
        except SignOnRefused as exc:
            return failed(request, str(exc), 403)
        except (SuspiciousOperation, jwt.PyJWTError) as exc:
            log.warning("single sign-on callback refused: %s", exc)
            return failed(request, "This sign-in answer is not one this service asked for, or it was already "
                                   "used. Start again from the login page.", 400)
        except requests.HTTPError as exc:
            status = exc.response.status_code if exc.response is not None else 0
            log.warning("single sign-on: the provider answered %s: %s", status, exc)
            if 400 <= status < 500:
                return failed(request, f"The identity provider did not accept this sign-in (it answered {status}). "
                                       "Start again from the login page.", 400)
            return failed(request, f"The identity provider answered {status}. Try again later.", 502)
        except (requests.RequestException, ValueError) as exc:  # unreachable, or not JSON
            log.warning("single sign-on: the provider could not be asked: %s", exc)
            return failed(request, "The identity provider could not be reached or gave an answer that is not "
                                   "understood. Try again later.", 502)

    def login_failure(self):
        error = self.request.GET.get("error", "")
        user = getattr(self, "user", None)
        if user is not None and not user.is_active:
            return failed(self.request, "Your account here is deactivated; ask an administrator.", 403)
        if error:
            message = f"The identity provider did not sign you in ({error[:100]})."
        else:
            message = "Signing on did not complete (the sign-in began in another browser, or too long ago)."
        return failed(self.request, message + " Start again from the login page.", 400)
