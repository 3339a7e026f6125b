"""The feature tests' fixtures: the RabbitMQ node of the AMQP tests (started once, by the
first test that asks for it)."""

from tests.support.rabbitmq import rabbitmq  # noqa: F401 - a fixture
