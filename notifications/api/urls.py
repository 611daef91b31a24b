from rest_framework.routers import SimpleRouter

from .views import ChannelViewSet, RuleViewSet

app_name = "notifications-api"

router = SimpleRouter()
router.register("channels", ChannelViewSet, basename="channel")
router.register("rules", RuleViewSet, basename="rule")

urlpatterns = router.urls
