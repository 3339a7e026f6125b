"""The feature tests' fixtures: the RabbitMQ node of the AMQP tests (started once, by the
first test that asks for it) and the browser that looks at the dashboard."""

from tests.support.browser import browser  # noqa: F401 - a fixture
from tests.support.rabbitmq import rabbitmq  # noqa: F401 - a fixture
