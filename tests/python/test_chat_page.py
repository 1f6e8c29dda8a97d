"""The chat page at `/` of `loom serve`, driven in headless Chromium through selenium: the page
loads without the API key (its API calls then need the key typed into it), streams a reply that
equals the same request through the API at temperature 0, shows tokens per second, keeps the
conversation across turns, and renders (a screenshot under the build folder)."""
import http.client
import json
import pathlib
import re
import shutil
import struct
import time
import zlib

import pytest

from conftest import missing, require_module
from test_serve import MODEL_NAME, Server

KEY = "page-key"
MAX_TOKENS = 24
FIRST = "What is the capital of France?"
SECOND = "And of Italy?"


def find_chromium():
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        missing("headless Chromium (chromium and chromedriver on PATH)",
                "run scripts/setup (Debian packages chromium chromium-driver)")
    return browser, driver


@pytest.fixture(scope="module")
def server(loom_bin, smollm2):
    s = Server(loom_bin, smollm2, "--parallel", "2", "-c", "1024", "--api-key", KEY)
    yield s
    s.close()


@pytest.fixture(scope="module")
def browser():
    webdriver = require_module("selenium.webdriver")
    path, driver_path = find_chromium()
    opts = webdriver.ChromeOptions()
    opts.binary_location = path
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1000,760", "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    d = webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=driver_path))
    d.set_page_load_timeout(20)
    d.set_script_timeout(20)
    yield d
    d.quit()


def api_chat(server, messages, **kw):
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    body = {"model": MODEL_NAME, "messages": messages, "temperature": 0, **kw}
    c.request("POST", "/v1/chat/completions", body=json.dumps(body),
              headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
    r = c.getresponse()
    out = json.loads(r.read())
    c.close()
    assert r.status == 200, out
    return out


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def turns(d):
    """The conversation as the page shows it: [(role, text, data-done, stats dataset)]."""
    return d.execute_script("""
      return [...document.querySelectorAll('#messages .msg')].map(m => {
        const s = m.querySelector('.stats');
        return [m.dataset.role, m.querySelector('.text').textContent, m.dataset.done || null,
                s ? {text: s.textContent, tokens: s.dataset.tokens, tps: s.dataset.tps,
                     prompt: s.dataset.promptTokens} : null];
      });""")


def errors(d):
    return d.execute_script("return [...document.querySelectorAll('.error')].map(e => e.textContent)")


def send(d, text):
    from selenium.webdriver.common.by import By
    box = d.find_element(By.ID, "input")
    box.send_keys(text)
    d.find_element(By.ID, "send").click()
    n = len(turns(d))
    # Streams, then finishes: the last bubble is the assistant's, marked done, the page idle.
    wait_for(lambda: d.execute_script("return document.body.dataset.state") == "idle" and
             turns(d)[-1][2] is not None, 20, "the streamed reply to finish")
    t = turns(d)
    assert not errors(d), errors(d)
    assert len(t) == n and t[-2][:2] == ["user", text], t
    return t[-1]


def png_ok(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 600 and height >= 400, (width, height)
    idat, pos = b"", 8
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    pixels = zlib.decompress(idat)
    # A rendered page (text, bubbles, buttons) has many distinct byte values; a blank one few.
    assert len(set(pixels)) > 32, "the screenshot looks blank"


def test_page_served(server):
    for path in ("/", "/index.html"):
        status, body, headers = server.raw("GET", path)  # no key: the page itself is open
        assert status == 200, (path, status)
        assert headers["Content-Type"] == "text/html; charset=utf-8"
        page = body.decode()
        assert page.startswith("<!doctype html>") and "/v1/chat/completions" in page
        # Self-contained: nothing fetched from elsewhere.
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "external asset in the page"
    assert server.raw("POST", "/", {"x": 1})[0] == 404
    assert server.raw("GET", "/index.htm")[0] == 404
    assert server.raw("GET", "/v1/models")[0] == 401  # the API still needs the key


def test_chat_in_browser(server, browser, build_dir):
    from selenium.webdriver.common.by import By
    d = browser
    d.get(f"http://127.0.0.1:{server.port}/")
    # Without the key the page loads but cannot list the model, and says why.
    wait_for(lambda: "401" in d.find_element(By.ID, "status").text, 10, "the page to report the missing key")
    # Sending then shows the server's error, and the message stays in the box to retry.
    d.find_element(By.ID, "input").send_keys(FIRST)
    d.find_element(By.ID, "send").click()
    err = wait_for(lambda: errors(d), 10, "the page to show the 401")
    assert "401" in err[0] and "API key" in err[0], err
    assert d.find_element(By.ID, "input").get_attribute("value") == FIRST and turns(d) == []
    d.find_element(By.ID, "input").clear()
    d.find_element(By.ID, "new-chat").click()
    assert errors(d) == []
    d.find_element(By.ID, "api-key").send_keys(KEY)
    d.find_element(By.ID, "temperature").clear()
    d.find_element(By.ID, "temperature").send_keys("0")
    d.find_element(By.ID, "max-tokens").clear()
    d.find_element(By.ID, "max-tokens").send_keys(str(MAX_TOKENS))
    d.find_element(By.ID, "input").click()  # the key field's change event lists the model
    wait_for(lambda: d.find_element(By.ID, "model").text == f"model: {MODEL_NAME}", 10, "the model's name")

    # Leaves the prompt's full KV blocks in the prefix cache, so the page's request and the API's
    # below both start from them and compute the same rows the same way (test_serve.py says why).
    api_chat(server, [{"role": "user", "content": FIRST}], max_tokens=1)

    role, text, done, stats = send(d, FIRST)
    assert role == "assistant" and done == "finished", (role, done)
    want = api_chat(server, [{"role": "user", "content": FIRST}], max_tokens=MAX_TOKENS)
    assert text.strip() and text == want["choices"][0]["message"]["content"], (text, want)
    assert int(stats["tokens"]) == want["usage"]["completion_tokens"], stats
    assert float(stats["tps"]) > 0 and re.search(r"\d+(\.\d)? tok/s", stats["text"]), stats
    first_prompt = int(stats["prompt"])

    role, text2, done, stats2 = send(d, SECOND)
    assert role == "assistant" and done == "finished" and text2.strip(), (role, done, text2)
    t = turns(d)
    assert [r for r, *_ in t] == ["user", "assistant", "user", "assistant"], t
    assert [x[1] for x in t[:3]] == [FIRST, text, SECOND], t
    # The second request carried the first turn: its prompt holds the first prompt and reply.
    assert int(stats2["prompt"]) > first_prompt + int(stats["tokens"]), (stats, stats2)
    assert d.execute_script("return window.loomChat.messages.length") == 4

    shot = pathlib.Path(build_dir) / "chat-page.png"
    shot.unlink(missing_ok=True)
    assert d.save_screenshot(str(shot))
    png_ok(shot)

    # New chat empties the conversation.
    d.find_element(By.ID, "new-chat").click()
    assert turns(d) == [] and d.execute_script("return window.loomChat.messages.length") == 0

    # Stop: a long reply cut short once it streams; the page keeps what came and the server
    # cancels the sequence (its KV blocks go back).
    d.find_element(By.ID, "max-tokens").clear()
    d.find_element(By.ID, "max-tokens").send_keys("800")
    cancelled = server.metric("loom_requests_cancelled_total") or 0
    d.find_element(By.ID, "input").send_keys("Write a very long story about a dragon.")
    d.find_element(By.ID, "send").click()
    wait_for(lambda: len(turns(d)) == 2 and turns(d)[-1][1], 20, "the long reply to start streaming")
    d.find_element(By.ID, "stop").click()
    wait_for(lambda: d.execute_script("return document.body.dataset.state") == "idle", 5, "the page to stop")
    role, text, done, stats = turns(d)[-1]
    assert done == "stopped" and text and "stopped" in stats["text"], (done, text, stats)
    assert int(stats["tokens"]) < 800
    wait_for(lambda: server.metric("loom_requests_cancelled_total") >= cancelled + 1, 10,
             "the server to cancel the stopped reply")
    wait_for(lambda: server.metric("loom_kv_blocks_in_use") == 0, 10, "the server to free the stopped reply's KV")
    assert d.execute_script("return window.loomChat.messages.length") == 2
