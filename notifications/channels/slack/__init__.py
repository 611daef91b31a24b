"""Slack incoming webhooks: a short readable message rendered from message.txt beside this module.

Every text the message quotes (a job's name, a run's error, a worker's name) is escaped as Slack
asks (``&``, ``<`` and ``>`` as ``&amp;``, ``&lt;`` and ``&gt;``), so a job named ``<!channel>`` or
``<https://evil|Open run>`` cannot mention everyone or make a link; and a run's error, shown in a
code block, cannot close it: no two backticks are left side by side in it. Slack decodes only those
three entities (https://api.slack.com/reference/surfaces/formatting#escaping): nothing else is
encoded.
"""

import json
import re

from ...render import context_for
from ..base import ChannelKindSpec, render_template
from ..http import check_url, post

SLACK_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
BACKTICKS_IN_A_ROW = re.compile(r"`(?=`)")


def escaped(value):
    """``value`` (a context: strings, dicts, lists) with each string escaped for Slack."""
    if isinstance(value, str):
        return "".join(SLACK_ESCAPES.get(char, char) for char in value)
    if isinstance(value, dict):
        return {key: escaped(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [escaped(item) for item in value]
    return value


def in_code_block(text):
    """``text`` that cannot end the code block it is put in: a zero-width space between backticks,
    and between the text and the block's own backticks."""
    text = BACKTICKS_IN_A_ROW.sub("`\u200b", text)
    return f"\u200b{text}\u200b" if text.startswith("`") or text.endswith("`") else text


def message_text(delivery):
    context = escaped(context_for(delivery))
    context["error"] = in_code_block(context["error"])
    return render_template(__file__, "message.txt", context).strip()


def send(config, text):
    post(config["url"], json.dumps({"text": text}).encode(), {"Content-Type": "application/json"})


# An incoming webhook's URL is itself the credential.
CHANNEL = ChannelKindSpec(name="slack", label="Slack", config_example={"url": "https://hooks.slack.com/..."},
                          render=message_text, send=send, validate=check_url, secret_fields=("url",))
