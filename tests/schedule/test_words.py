"""A cron expression in plain words (cronsvc.schedule.words), as `cronsvc ls` shows it."""

from __future__ import annotations

import pytest

from cronsvc.schedule.words import describe


@pytest.mark.parametrize("expr, words", [
    ("* * * * *", "every minute"),
    ("*/5 * * * *", "every 5 minutes"),
    ("30 2 * * *", "at 02:30 every day"),
    ("0 9 * * 1-5", "at 09:00 on Monday to Friday"),
    ("0 9 * * MON-FRI", "at 09:00 on Monday to Friday"),
    ("5,35 9,21 * * *", "at 09:05, 09:35, 21:05 and 21:35 every day"),
    ("0 */2 * * *", "every 2 hours"),
    ("15 * * * *", "every hour at minute 15"),
    ("*/15 9-17 * * 1-5", "every 15 minutes from 09:00 to 17:59 on Monday to Friday"),
    ("0 0 1 * *", "at 00:00 on day 1 of the month"),
    ("0 0 L * *", "at 00:00 on the last day of the month"),
    ("0 0 15W * *", "at 00:00 on the weekday nearest day 15 of the month"),
    ("0 22 * * 5L", "at 22:00 on the last Friday of the month"),
    ("0 0 * * 1#2", "at 00:00 on the second Monday of the month"),
    ("0 0 1 * 1", "at 00:00 on day 1 of the month or on Monday"),
    ("0 0 * 6-8 *", "at 00:00 in June to August"),
    ("@yearly", "at 00:00 on January 1"),
    ("@weekly", "at 00:00 on Sunday"),
    ("@hourly", "every hour"),
    ("*/10 * * * * *", "every 10 seconds"),
    ("30 * * * * *", "every minute at second 30"),
    ("10-20 * * * *", "at minute 10 to 20 of every hour"),
    # steps of hours, written as */n or as the whole range
    ("1-5 */2 * * *", "at minute 1 to 5 of every 2nd hour"),
    ("*/10 */3 * * *", "every 10 minutes of every 3rd hour"),
    ("5 0-23/3 * * *", "every 3 hours at minute 5"),
    ("0-59/5 * * * *", "every 5 minutes"),
])
def test_describe_says_the_schedule_in_plain_words(expr: str, words: str) -> None:
    assert describe(expr) == words


@pytest.mark.parametrize(("expr", "words"), [
    # macros and spacing
    ("@daily", "at 00:00 every day"),
    ("@midnight", "at 00:00 every day"),
    ("@monthly", "at 00:00 on day 1 of the month"),
    ("@annually", "at 00:00 on January 1"),
    ("@HOURLY", "every hour"),
    ("  */5  *  * * *  ", "every 5 minutes"),
    ("*/1 * * * *", "every minute"),
    # times of day
    ("0 */3 * * *", "every 3 hours"),
    ("10,20 */2 * * *", "every 2 hours at minute 10 and 20"),
    ("0 9-17 * * *", "every hour from 09:00 to 17:00 every day"),
    ("30 9-17 * * *", "every hour from 09:30 to 17:30 every day"),
    ("0 1,2,3,4,5,6,7 * * *", "at minute 0 past hour 1, 2, 3, 4, 5, 6 and 7 every day"),
    ("5/15 * * * *", "at minute 5 (every 15) of every hour"),
    ("0-30/10 * * * *", "at minute 0 to 30 (every 10) of every hour"),
    # seconds
    ("*/20 * * * * *", "every 20 seconds"),
    ("5 * * * * *", "every minute at second 5"),
    ("0 5 * * * *", "every hour at minute 5"),  # second 0 says nothing
    # days of the week
    ("0 12 * * 0", "at 12:00 on Sunday"),
    ("0 0 * * 7", "at 00:00 on Sunday"),
    ("0 12 * * sun", "at 12:00 on Sunday"),
    ("0 12 * * 0,6", "at 12:00 on Sunday and Saturday"),
    ("0 0 * * 1,3,5", "at 00:00 on Monday, Wednesday and Friday"),
    ("0 0 * * mon-fri", "at 00:00 on Monday to Friday"),
    ("0 0 * * L5", "at 00:00 on the last Friday of the month"),
    ("0 0 * * 5#3", "at 00:00 on the third Friday of the month"),
    ("0 0 * * fri#1", "at 00:00 on the first Friday of the month"),
    # days of the month
    ("0 0 */2 * *", "at 00:00 every 2 days"),
    ("0 0 1,15 * *", "at 00:00 on days 1 and 15 of the month"),
    ("0 0 1-7 * *", "at 00:00 on day 1 to 7 of the month"),
    ("0 0 1W * *", "at 00:00 on the weekday nearest day 1 of the month"),
    ("0 12 L * *", "at 12:00 on the last day of the month"),
    ("0 */2 1 * *", "every 2 hours on day 1 of the month"),
    # both day fields: either may match; one starting with * means both must
    ("0 0 13 * 5", "at 00:00 on day 13 of the month or on Friday"),
    ("0 0 2 * 1-5", "at 00:00 on day 2 of the month or on Monday to Friday"),
    ("0 0 */2 * 1", "at 00:00 every 2 days if it is Monday"),
    # months
    ("0 0 * */3 *", "at 00:00 every 3 months from January"),
    ("0 0 * 3/2 *", "at 00:00 every 2 months from March"),
    ("0 0 * jan *", "at 00:00 in January"),
    ("0 0 * 1,7 *", "at 00:00 in January and July"),
    ("0 0 * 2 1", "at 00:00 on Monday in February"),
    ("0 0 1 1,7 *", "at 00:00 on day 1 of the month in January and July"),
    ("30 9 1 1 *", "at 09:30 on January 1"),
    ("0 0 31 12 *", "at 00:00 on December 31"),
])
def test_more_shapes_in_words(expr: str, words: str) -> None:
    assert describe(expr) == words
