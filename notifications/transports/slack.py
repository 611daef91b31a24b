"""Slack incoming webhooks: a short readable message rendered from templates/notifications/slack.txt."""

import json

from django.template.loader import render_to_string

from ..render import context_for
from .http import post


def send(channel, delivery):
    text = render_to_string("notifications/slack.txt", context_for(delivery)).strip()
    post(channel.config["url"], json.dumps({"text": text}).encode(), {"Content-Type": "application/json"})
