"""The API of a resource declared once (``jobs.resources.Resource``): ``GET, POST /api/<route>/``
and ``GET, PATCH, PUT, DELETE /api/<route>/<name or id>/``. A user reads what the resource's
``visible`` gives them (anything else answers 404); every change is one of its actions, which
checks who may and writes the audit entry. A resource with calls of its own subclasses
``ResourceViewSet``; the others are ``viewset_of(resource)``."""

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.exceptions import NotFound

from .params import bool_param, int_param, text_param
from .views import ApiViewSet

FILTERS = {int: (int_param, OpenApiTypes.INT), str: (text_param, OpenApiTypes.STR),
           bool: (bool_param, OpenApiTypes.BOOL)}


def api_docs(resource):
    """What each call of the resource says in the schema, the list with its filters."""
    docs = {name: extend_schema(description=text) for name, text in resource.api_docs.items() if name != "list"}
    parameters = [OpenApiParameter(name, FILTERS[kind][1], description=text)
                  for name, (kind, text) in resource.filters.items()]
    docs["list"] = extend_schema(description=resource.api_docs["list"], **({"parameters": parameters}
                                                                            if parameters else {}))
    return docs


class ResourceViewSet(ApiViewSet, viewsets.ModelViewSet):
    resource = None  # the jobs.resources.Resource a subclass serves

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.resource is None:
            return
        if cls.resource.name_field:
            cls.lookup_value_regex = "[^/]+"
        if not cls.resource.api_deletes:
            cls.http_method_names = [name for name in cls.http_method_names if name != "delete"]
        extend_schema_view(**api_docs(cls.resource))(cls)

    def get_serializer_class(self):
        return self.resource.shape()

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return self.resource.model.objects.none()
        found = self.resource.visible(self.request.user)
        params = self.request.query_params
        if self.action == "list":
            for name, (kind, _) in self.resource.filters.items():
                if name in params:
                    found = found.filter(**{name: FILTERS[kind][0](params, name)})
        return found

    def get_object(self):
        """By its name (``name_field``) first, then by id."""
        if not self.resource.name_field:
            return super().get_object()
        value = self.kwargs[self.lookup_url_kwarg or self.lookup_field]
        found = None
        if "\x00" not in value:  # PostgreSQL text cannot hold NUL: a 500 if it reached the query
            found = self.get_queryset().filter(**{self.resource.name_field: value}).first()
            if found is None and value.isdigit() and len(value) < 19:
                found = self.get_queryset().filter(pk=int(value)).first()
        if found is None:
            raise NotFound(self.resource.not_found)
        self.check_object_permissions(self.request, found)
        return found

    def perform_create(self, serializer):
        serializer.instance = self.resource.create(self.actor, self.resource.model(**serializer.validated_data))

    @transaction.atomic  # the change and its audit entry with the request's reads
    def update(self, request, *args, **kwargs):
        return super().update(request, *args, **kwargs)

    def perform_update(self, serializer):
        serializer.instance = self.resource.edit(self.actor, serializer.instance, dict(serializer.validated_data))

    def perform_destroy(self, instance):
        self.resource.delete(self.actor, instance)


def viewset_of(resource):
    """The API's viewset of a resource without calls of its own."""
    return type(f"{resource.model.__name__}ViewSet", (ResourceViewSet,), {"resource": resource,
                                                                        "__module__": __name__})


def register(router, resource, viewset=None):
    router.register(resource.route, viewset or viewset_of(resource), basename=resource.basename)
