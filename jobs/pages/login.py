"""The pages' login: user name and password, and "Sign in with ..." when single sign-on is on (sso/)."""

from django.conf import settings
from django.contrib.auth import views as auth_views


class LoginView(auth_views.LoginView):
    template_name = "pages/login.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["sso_provider"] = settings.OIDC_PROVIDER_NAME if settings.OIDC_ENABLED else ""
        return context
