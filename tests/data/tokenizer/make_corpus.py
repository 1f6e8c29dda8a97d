#!/usr/bin/env python3
"""Writes corpus.jsonl, the tokenizer agreement corpus (run once; deterministic).

Each line is {"kind": ..., "text": str} for valid UTF-8, or {"kind": ..., "b64": str} for
byte strings that are not valid UTF-8. Kinds cover what tokenizers get wrong: prose, code,
digit runs, whitespace runs, emoji (ZWJ, skin tones, flags), CJK, RTL scripts, Indic and Thai,
combining marks, contractions in any case, URLs, JSON, special-token texts and broken bytes.
Usage: python3 make_corpus.py [OUT]  (default: corpus.jsonl next to this script)
"""
import base64
import json
import pathlib
import random
import sys

R = random.Random(20240531)

PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "Call me Ishmael. Some years ago—never mind how long precisely—having little or no money in my purse,",
    "In the beginning God created the heaven and the earth.",
    "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer",
    "She sells sea-shells on the sea-shore; the shells she sells are sea-shells, I'm sure.",
    "A language model assigns probabilities to sequences of tokens.",
    "Mr. and Mrs. Dursley, of number four, Privet Drive, were proud to say that they were perfectly normal.",
    "\"Hello,\" she said. \"Are you coming?\" He didn't answer; he couldn't.",
    "The U.S.A. (United States of America) declared independence in 1776.",
    "Naïve café owners in Zürich serve crème brûlée à la carte.",
    "Ångström, façade, jalapeño, résumé, coöperate, Œuvre, straße, ĳssel.",
]
WORDS = ("the of and to in is you that it he was for on are as with his they I at be this have from or one had "
         "by word but not what all were we when your can said there use an each which she do how their if will "
         "up other about out many then them these so some her would make like him into time has look two more "
         "write go see number no way could people my than first water been call who oil its now find long down "
         "day did get come made may part tokenizer merge vocabulary piece byte unicode llama gemma").split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D", "'Re", "'lL"]
CODE = [
    "def f(x):\n    return x * 2\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }\n",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
    "const add = (a, b) => a + b; // arrow\nconsole.log(add(1, 2));\n",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name HAVING COUNT(*) > 1;",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
    "<div class=\"a\"><span>x</span></div>\n<table><tr><td>1</td></tr></table>",
    "if [[ -f \"$FILE\" ]]; then\n  echo \"exists\" >&2\nfi\n",
    "x = [i**2 for i in range(10) if i % 2 == 0]  # squares\n",
    "template <typename T> T max(T a, T b) { return a > b ? a : b; }",
    "public static void main(String[] args) throws Exception { System.out.println(args.length); }",
    "\\begin{equation} E = mc^2 \\end{equation}",
    "a->b; c::d; e?.f ?? g; h <=> i; j !== k; l >>= 2; m ||= n;",
]
EMOJI = ["😀", "👍", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵", "🇺🇸", "❤️", "🤷🏿‍♀️", "🧑🏻‍🚀", "✨", "🔥", "🙏🏼", "😂😂😂", "🫠", "1️⃣", "©️", "⌚"]
CJK = ["你好，世界！", "我爱自然语言处理。", "東京は日本の首都です。", "カタカナとひらがな", "한국어 텍스트입니다.", "中文，日本語，한국어",
       "龥齉龘", "〇一二三四五六七八九十", "「引用」『二重』【括弧】", "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ１２３"]
RTL = ["مرحبا بالعالم", "السلام عليكم ورحمة الله", "שלום עולם", "עברית עם ניקוד: שָׁלוֹם", "English then عربي then English",
       "٠١٢٣٤٥٦٧٨٩ أرقام", "فارسی: سلام دنیا"]
INDIC = ["नमस्ते दुनिया", "हिन्दी में पाठ", "संस्कृतम्", "বাংলা ভাষা", "தமிழ் மொழி", "ಕನ್ನಡ", "ગુજરાતી"]
THAI = ["สวัสดีครับ", "ภาษาไทยไม่มีช่องว่างระหว่างคำ", "ລາວ", "ខ្មែរ", "မြန်မာ"]
COMBINING = ["e\u0301", "a\u0300\u0301\u0302", "n\u0303o", "Z\u0351\u0352\u0353a\u0354\u0355l\u0356g\u0357o", "\u0301start",
             "A\u030A", "\u1100\u1161\u11A8", "ﬁ ﬂ ﬀ", "Ⅻ ⅻ ½ ² ³ ¼", "x\u200by\u200cz\u200dw", "\u2060word\ufeff"]
SPECIALS = ["<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|>", "<start_of_turn>user\nhi<end_of_turn>\n",
            "<start_of_turn>model\n", "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "</s>", "<s>", "<unused0>", "<unused6241>",
            "<start_of_image>", "[multimodal]", "<table><tr><td>", "<|im_start|><|im_start|>", "<<|im_end|>>", "x<bos>y",
            "<fim_prefix>a<fim_suffix>b<fim_middle>", "<filename>a.py", "<|im_start", "im_start|>", "<start_of_turn",
            "<|im_start|>system\nYou are helpful.<|im_end|>", "  <bos>  ", "\n<eos>\n", "<h1>Title</h1>"]
URLS = ["https://example.com/path?q=1&r=two#frag", "http://localhost:8080/api/v1/items/42", "ftp://files.example.org/pub/file.tar.gz",
        "mailto:someone@example.com", "https://en.wikipedia.org/wiki/Byte_pair_encoding", "www.github.com/ggml-org/llama.cpp",
        "file:///usr/share/common-licenses/GPL-3", "https://例え.jp/パス"]
WS_PARTS = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2003", "\u0085", "\u000b", "\u000c",
            "\u2028", "\u1680", "\u202f", "\x1c", "\x1f", " \n ", "\n \n", "    \n"]
INVALID = [b"\xff", b"\xfe\xff", b"\x80", b"abc\x80def", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(", b"\xf0\x9f\x98", b"\xf0\x9f",
           b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80",
           b"caf\xe9", b"na\xefve", b"\x80\x81\x82\x83", b"hello \xc3\xa9\xc3", b"\xe4\xbd\xa0\xe5\xa5", b"\xf0\x9f\x98\x80\xf0\x9f",
           b"\xc3\xa9\x80", b"a\xf4\x90\x80\x80b", b"\xef\xbb\xbfBOM", b"\x00nul\x00", b"\xe2\x28\xa1", b"\xa0\xa1", b"1\xff2\xfe3"]


def digits(n):
    return "".join(R.choice("0123456789") for _ in range(n))


def sentence():
    n = R.randint(3, 18)
    ws = [R.choice(WORDS) for _ in range(n)]
    if R.random() < 0.3:
        ws[0] = ws[0].capitalize()
    if R.random() < 0.2:
        ws[R.randrange(n)] = R.choice(WORDS).upper()
    s = " ".join(ws)
    return s + R.choice([".", "!", "?", ",", ";", ":", "...", ""])


def gen():
    out = []

    def add(kind, s):
        out.append((kind, s))

    for s in PROSE:
        add("prose", s)
        add("prose", " " + s)
        add("prose", s + " ")
        add("prose", s.upper())
    for _ in range(260):
        add("prose", " ".join(sentence() for _ in range(R.randint(1, 4))))
    for s in CODE:
        add("code", s)
        add("code", s.replace("    ", "\t"))
        add("code", "  " + s + "\n\n")
    for _ in range(120):
        a, b = R.sample(CODE, 2)
        add("code", a + R.choice(["\n", "\n\n", "\r\n", "\t"]) + b)
    for n in list(range(1, 25)) + [30, 40, 64, 100]:
        add("digits", digits(n))
        add("digits", "x" + digits(n) + "y")
        add("digits", " " + digits(n) + " " + digits(max(1, n // 2)))
    for _ in range(120):
        add("numbers", R.choice(["{:.3f}", "{:,}", "{:e}", "${:.2f}", "{}%", "v{}.0.1", "-{}", "+{}", "0x{:X}", "{} km/h", "№{}"])
            .format(R.randint(0, 10**R.randint(1, 12))) + R.choice(["", " ", "."]))
    for _ in range(200):
        parts = [R.choice(WS_PARTS + WORDS[:30]) for _ in range(R.randint(1, 10))]
        add("whitespace", "".join(parts))
    for w in WS_PARTS:
        for n in (1, 2, 3, 5, 8, 17, 33):
            add("whitespace", w * n)
            add("whitespace", "a" + w * n + "b")
            add("whitespace", w * n + "word")
    for e in EMOJI:
        add("emoji", e)
        add("emoji", "I " + e + " this")
        add("emoji", e * 3)
    for _ in range(80):
        add("emoji", "".join(R.choice(EMOJI + [" ", "a", "!"]) for _ in range(R.randint(2, 8))))
    for group, kind in ((CJK, "cjk"), (RTL, "rtl"), (INDIC, "indic"), (THAI, "thai"), (COMBINING, "combining")):
        for s in group:
            add(kind, s)
            add(kind, " " + s + " ")
            add(kind, s + "\n" + R.choice(PROSE))
        for _ in range(40):
            add(kind, R.choice(group) + R.choice([" ", "", "\n", ", "]) + R.choice(group + [sentence()]))
    for c in CONTRACTIONS:
        for w in ("it", "I", "we", "they", "IT", "She", "don", "y"):
            add("contraction", w + c)
            add("contraction", w + c + " go")
        add("contraction", c)
        add("contraction", " " + c)
        add("contraction", "'" + c)
    for _ in range(60):
        add("contraction", " ".join(R.choice(WORDS) + R.choice(CONTRACTIONS + [""]) for _ in range(R.randint(2, 6))))
    for u in URLS:
        add("url", u)
        add("url", "See " + u + " for details.")
        add("url", "<" + u + ">")
    for _ in range(60):
        obj = {R.choice(WORDS): R.choice([R.randint(-999, 99999), R.random(), R.choice(WORDS), None, True, [1, 2, "x"], {"k": "v"}])
               for _ in range(R.randint(1, 5))}
        add("json", json.dumps(obj, indent=R.choice([None, 2, 4]), ensure_ascii=R.random() < 0.5))
    add("json", json.dumps({"name": "Zoë", "emoji": "😀", "cjk": "中文", "esc": "a\"b\\c\n"}))
    for s in SPECIALS:
        add("special", s)
        add("special", "text " + s + " text")
        add("special", s + s)
        add("special", s.upper())
    for _ in range(80):
        add("special", R.choice(SPECIALS) + sentence() + R.choice(SPECIALS) + R.choice(["", "\n", " "]))
    for _ in range(100):
        kinds = [PROSE, CODE, EMOJI, CJK, RTL, INDIC, THAI, COMBINING, URLS, SPECIALS, WS_PARTS]
        add("mixed", "".join(R.choice(R.choice(kinds)) for _ in range(R.randint(2, 6))))
    add("edge", "")
    for s in [" ", "a", "A", "\n", "'", "''", "'''", "'s'", "s'", "\u2581", "\u2581\u2581x", "<0x41>", "<0x0A>", "\\u0000", "▁▁▁", "~", "~~~",
              "a~b", " ~!", " ~a", "x ~!", " ~~", " ~ ", "~!", " $!", " ^_^ ", "a ~\n", "$$", "<=>", "^|^", "´`", "\x7f", "\x01\x02", "\u00ad", "\ufffd", "\U0001F600"[0], "Ω≈ç√∫", "ΑΒΓ αβγ", "Привет, мир!",
              "Ελληνικά", "ქართული", "Հայերեն", "አማርኛ", "ᚠᛇᚻ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝟘𝟙𝟚", "\U00020000\U0002A6D6", "\ue000\uf8ff", "\U000F0000"]:
        add("edge", s)
    for b in INVALID:
        add("invalid", b)
        add("invalid", b"prefix " + b)
        add("invalid", b + b" suffix")
        add("invalid", b"<|im_start|>" + b + b"<end_of_turn>")
    for _ in range(60):
        raw = bytes(R.randrange(256) for _ in range(R.randint(1, 24)))
        add("invalid", raw)
    return out


def beyond_unicode(b):
    """True when llama.cpp's lenient UTF-8 decoder yields a code point above U+10FFFF (F4 90.., F5..F7
    leads): llama.cpp's BPE path then throws std::invalid_argument through llama_tokenize and
    the process aborts, so such strings get their own kind and are compared for SPM only."""
    i = 0
    while i < len(b):
        c = b[i]
        if 0xF0 <= c <= 0xF7 and i + 3 < len(b) and all(0x80 <= x <= 0xBF for x in b[i + 1:i + 4]):
            if ((c & 7) << 18 | (b[i + 1] & 63) << 12 | (b[i + 2] & 63) << 6 | (b[i + 3] & 63)) > 0x10FFFF:
                return True
            i += 4
        elif 0xE0 <= c <= 0xEF and i + 2 < len(b) and all(0x80 <= x <= 0xBF for x in b[i + 1:i + 3]):
            i += 3
        elif 0xC0 <= c <= 0xDF and i + 1 < len(b) and 0x80 <= b[i + 1] <= 0xBF:
            i += 2
        else:
            i += 1
    return False


def main():
    path = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).with_name("corpus.jsonl")
    seen, lines = set(), []
    for kind, s in gen():
        b = s if isinstance(s, bytes) else s.encode("utf-8")
        if b in seen:
            continue
        seen.add(b)
        if beyond_unicode(b):
            kind = "beyond_unicode"
        try:
            rec = {"kind": kind, "text": b.decode("utf-8")}
        except UnicodeDecodeError:
            rec = {"kind": kind, "b64": base64.b64encode(b).decode()}
        lines.append(json.dumps(rec, ensure_ascii=True))
    path.write_text("\n".join(lines) + "\n")
    print(f"{path}: {len(lines)} strings")


if __name__ == "__main__":
    main()
