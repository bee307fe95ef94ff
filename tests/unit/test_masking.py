import pytest

from processors.runs.masking import MULTI_PART_RULES, TOKEN_RULES, mask


@pytest.mark.parametrize(
    ("message", "template"),
    [
        # url
        ("GET https://api.example.com/v1/orders?id=7 failed", "GET <*> failed"),
        # email
        ("mail to ops.team+alerts@example.co.uk bounced", "mail to <*> bounced"),
        # path: Unix, Windows, with a glob
        ("cannot open /var/lib/app/state.db for writing", "cannot open <*> for writing"),
        ("adding path spec: /mapreduce/*", "adding path spec: <*>"),
        ("Loaded C:\\Windows\\winsxs\\cbscore.dll ok", "Loaded <*> ok"),
        # dotted names (hosts, classes), but not an upper-case constant at the end
        ("reverse mapping for ns.example.com failed", "reverse mapping for <*> failed"),
        ("Registering class org.apache.Foo$Bar", "Registering class <*>"),
        ("action:android.intent.action.SCREEN_ON", "action:android.intent.action.SCREEN_ON"),
        # network addresses
        ("Received SNMP packet(s) from 67.170.148.126", "Received SNMP packet(s) from <*>"),
        ("from 10.0.0.12:5432 to fe80::1ff:fe23", "from <*> to <*>"),
        ("MDNS: Addr: 2607:f140:6000:8:f882:21d2:d1af:f093", "MDNS: Addr: <*>"),
        ("proxy.example.edu:5070 open through proxy", "<*> open through proxy"),
        ("chip FF:F2:9F:16:EB:27 reset", "chip <*> reset"),
        # timestamps: ISO, syslog, date(1), Apache
        ("started at 2024-01-02T03:04:05.678Z ok", "started at <*> ok"),
        ("at Sat Jun 25 04:49:48 2005 ok", "at <*> ok"),
        ("status=M Thu Aug 04 15:29:45 PDT 2005", "status=<*>"),
        ("hit [02/Jan/2024:03:04:05 +0000] ok", "hit [<*>] ok"),
        # quoted single tokens, but not quoted phrases (which may be a request line)
        ("KeyError: 'user' missing", "KeyError: <*> missing"),
        ('10.0.0.1 "GET /v2/servers HTTP/1.1" status: 200', '<*> "GET <*>" status: <*>'),
        # key=value, a quoted value and one in braces included
        ('release lock=f3 name=com.android.phone ws=WorkSource{10113} tag="View Lock"',
         "release lock=<*> name=<*> ws=<*> tag=<*>"),
        # a user name, the one word variable common to all kinds of logs
        ("Failed password for invalid user webmaster from 1.2.3.4",
         "Failed password for invalid user <*> from <*>"),
        ("session opened for user news by (uid=0)", "session opened for user <*> by (uid=<*>)"),
        # any token with a digit, up to a delimiter, but for device names
        ("job_1445087491445_0005 finished on node-31", "<*> finished on <*>"),
        ("Link Up on en0 via scip0, not on host12", "Link Up on en0 via scip0, not on <*>"),
        ("onExtend:1514736600000 11 0 4", "onExtend:<*>"),
        ("caused by dcbf.........0", "caused by dcbf......... <*>"),
        # long hex words without digits
        ("token deadbeefcafe expired", "token <*> expired"),
        # booleans and nulls
        ("shouldBlockLocation ret:false, cached: None", "shouldBlockLocation ret:<*>, cached: <*>"),
        # a number and its unit are one variable
        ("estimated size 16.0 B, free 317.5 KB", "estimated size <*>, free <*>"),
        ("lifetime <1 sec", "lifetime <*>"),
        # runs of variables, and a variable's annotation in brackets
        ("nodes node-1, node-2, node-3 down", "nodes <*> down"),
        ("1190 bytes (1.16 KB) sent", "<*> sent"),
        ("connection from 1.2.3.4 (host-1.example.com) at 10:00", "connection from <*> at <*>"),
    ],
)
def test_each_rule_masks_its_kind_of_variable(message: str, template: str) -> None:
    assert mask(message) == template


@pytest.mark.parametrize(
    "message",
    [
        "2024-01-02 03:04:05,678 ERROR [main] c.a.o.OrderService - payment declined",
        "[2024-01-02T03:04:05Z] WARN payment declined",
        "Jan  2 03:04:05 ERROR 1234 --- [pool-1-thread-3] payment declined",
        "E payment declined",
        "ERROR: payment declined",
    ],
)
def test_leading_log_noise_is_dropped(message: str) -> None:
    assert mask(message) == "payment declined"


def test_a_leading_bracket_or_number_alone_is_not_noise() -> None:
    assert mask("[instance: abc] VM Started") == "[instance: abc] VM Started"
    assert mask("12 files copied") == "<*> files copied"


def test_whitespace_is_normalised() -> None:
    assert mask("  disk\tfull \n on   sda ") == "disk full on sda"


def test_words_that_tell_templates_apart_are_kept() -> None:
    assert mask("Too many authentication failures for admin") != mask(
        "Too many authentication failures for root")
    assert mask("Transitioned from NEW to RUNNING") != mask("Transitioned from RUNNING to DONE")


def test_every_rule_has_a_test_above() -> None:
    # A reminder to extend the table when a rule is added.
    assert [rule.name for rule in (*MULTI_PART_RULES, *TOKEN_RULES)] == [
        "url", "email", "path", "timestamp", "ip address", "host:port, IPv6 or MAC", "dotted name",
        "quoted", "key=value", "user name", "digits", "hex", "boolean",
    ]
