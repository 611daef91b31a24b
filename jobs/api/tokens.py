"""``GET /api/tokens/``: the caller's API tokens (prefix, made, expires, whether it is the one in use);
``DELETE /api/tokens/<prefix>/``: revoke one of them (jobsctl's ``token revoke``). Tokens are made on
the pages or with ``manage.py tokens create`` (jobs.access.tokens), where the key can be shown once."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from drf_spectacular.utils import extend_schema
from knox.models import AuthToken
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.models import Source

from ..access import tokens
from ..actions import tokens as token_actions
from ..actions.jobs import Actor


class TokenScheme(OpenApiAuthenticationExtension):
    """``Authorization: Token <key>`` in the schema, named as before the tokens were hashed."""

    target_class = "jobs.access.tokens.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return build_bearer_security_scheme_object(header_name="Authorization", token_prefix="Token")


class TokenSerializer(serializers.Serializer):
    prefix = serializers.CharField(source="token_key", help_text="The key's first 15 characters.")
    created = serializers.DateTimeField()
    expires = serializers.DateTimeField(source="expiry", allow_null=True, help_text="null: never.")
    current = serializers.SerializerMethodField(help_text="Whether this request authenticated with it.")

    def get_current(self, token) -> bool:
        used = self.context["request"].auth
        return isinstance(used, AuthToken) and used.digest == token.digest


class TokenList(APIView):
    @extend_schema(responses=TokenSerializer(many=True), summary="Your API tokens, newest first")
    def get(self, request):
        return Response(TokenSerializer(tokens.of_user(request.user), many=True, context={"request": request}).data)


class TokenDetail(APIView):
    @extend_schema(responses={204: None}, summary="Revoke one of your API tokens")
    def delete(self, request, prefix):
        if not token_actions.revoke(Actor.of_request(request, Source.API), prefix, request.user):
            raise NotFound(f"You have no token {prefix}.")
        return Response(status=status.HTTP_204_NO_CONTENT)
