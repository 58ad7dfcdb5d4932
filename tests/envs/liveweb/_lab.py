"""A tiny local site with the awkward things real pages do: dialogs, new tabs, downloads, a page that
never loads, requests to other origins."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PAGES = {
    "/": """<!doctype html><title>Lab</title><link rel="icon" href="data:,"><h1>Lab</h1>
<a href="/second" target="_blank">Open new tab</a>
<button onclick="alert('hello from lab')">Alert me</button>
<button onclick="document.getElementById('out').textContent = confirm('sure?') ? 'yes' : 'no'">Confirm me</button>
<p id="out">nothing yet</p>
<a href="/file.txt">Get file</a>
<a href="/hang">Slow page</a>
<a href="/external">External page</a>""",
    "/second": "<!doctype html><title>Second</title><h1>Second page</h1>",
    "/form": """<!doctype html><title>Form</title><h1>Form</h1>
<label>Attachment <input type="file" id="f" onchange="document.getElementById('got').textContent = this.files[0].name"></label>
<p id="got">no file</p>
<label>Colour <select id="c"><option>red</option><option>green</option></select></label>
<label>Note <input id="note" onkeyup="document.getElementById('typed').textContent = this.value"></label>
<p id="typed">nothing typed</p>
<button draggable="true" ondragstart="event.dataTransfer.setData('text/plain', 'x')">Drag me</button>
<section aria-label="Drop zone" style="width:200px;height:60px;border:1px solid #999"
 ondragover="event.preventDefault()" ondrop="event.preventDefault(); document.getElementById('dropped').textContent = 'dropped it'">Drop here</section>
<p id="dropped">not dropped</p>""",
    "/wa": """<!doctype html><title>WA</title><h1 id="t">Tom &amp; Jerry&#39;s  Shop</h1>
<p class="price">Price: $1,000.00</p><div id="hidden" style="display:none">secret note</div>
<ul><li>alpha</li><li>beta</li></ul><span id="n"></span>""",
    "/external": """<!doctype html><title>External</title><h1>External</h1>
<img src="http://example.invalid/tracker.png" alt="tracker"><a href="http://example.invalid/">Elsewhere</a>""",
}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802  (http.server's naming)
        if self.path == "/hang":
            time.sleep(20)  # longer than any test's navigation timeout
            return
        if self.path == "/file.txt":
            body = b"lynn download test\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Disposition", 'attachment; filename="report.txt"')
        elif self.path == "/whoami":
            body = f"<!doctype html><title>Who</title><p>cookie: {self.headers.get('Cookie', 'none')}</p>".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
        elif self.path in PAGES:
            body = PAGES[self.path].encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
        else:
            body = b"not found"
            self.send_response(404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class LabServer:
    """Serves the lab pages from a thread of the test process."""

    def __init__(self) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


LAB_TASKS = [
    {
        "sites": ["lab"],
        "task_id": "lab.greet",
        "require_login": False,
        "start_url": "__LAB__/",
        "intent_template": "Say {{word}}",
        "instantiation_dict": {"word": "hi"},
        "intent": "Say hi",
        "eval": {"eval_types": ["string_match"], "reference_answers": {"must_include": ["hi"]}},
    },
    {
        "sites": ["lab"],
        "task_id": "lab.second",
        "require_login": False,
        "start_url": "__LAB__/",
        "intent": "Open the second page",
        "eval": {
            "eval_types": ["url_match", "program_html"],
            "reference_url": "__LAB__/second",
            "program_html": [
                {"url": "last", "locator": "h1", "required_contents": {"exact_match": "Second page"}}
            ],
        },
    },
]
