"""Tests of cronsvc.contrib: the consumer side of dispatched fires."""
