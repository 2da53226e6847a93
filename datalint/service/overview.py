"""The overview page: datasets, samples, quarantined, last scan, running scans with live progress.

Rendered on the server with the report's escape-by-default markup; its one small script polls
`/v1/scans?state=running` (same origin) to move the progress bars. Served with a strict CSP in the
header: nothing loads from anywhere, only that script (by hash) runs, and it may only talk to this
service.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from datalint.report.markup import Html, el

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2rem;color:#222}
table{border-collapse:collapse;margin:1rem 0}
td,th{padding:.3rem .8rem;border-bottom:1px solid #ddd;text-align:left}
th{background:#f4f4f4}.num{text-align:right;font-variant-numeric:tabular-nums}
progress{width:12rem}.muted{color:#777}.bad{color:#b00020;font-weight:600}
"""

SCRIPT = """
(function(){
  function update(){
    fetch('/v1/scans?state=running',{credentials:'same-origin'}).then(function(r){return r.ok?r.json():null})
    .then(function(data){
      if(!data){return;}
      var seen={};
      data.scans.forEach(function(job){
        seen[job.id]=true;
        var row=document.getElementById('job-'+job.id);
        if(!row){return;}
        var p=job.progress, bar=row.querySelector('progress'), label=row.querySelector('.progress-text');
        if(p.total){bar.max=p.total;bar.value=p.done;}
        label.textContent=p.done+(p.total?' / '+p.total:'')+' samples'+(p.rate?', '+p.rate+'/s':'')
          +(p.eta!=null?', ETA '+Math.round(p.eta)+' s':'')+', '+p.findings+' findings';
      });
      document.querySelectorAll('tr.job').forEach(function(row){
        if(!seen[row.id.slice(4)]){row.querySelector('.state').textContent='finished (reload)';}
      });
    }).catch(function(){});
  }
  setInterval(update,1000);update();
})();
"""


def _hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


CSP = (
    f"default-src 'none'; style-src {_hash(CSS)}; script-src {_hash(SCRIPT)}; connect-src 'self'; "
    "img-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def render_overview(datasets: list[dict[str, Any]], running: list[dict[str, Any]], version: str) -> str:
    rows = [
        el(
            "tr",
            el("td", el("a", d["name"], href=f"/v1/datasets/{d['name']}/report", class_="report-link")),
            el("td", d["source"], _watching(d.get("watcher")), _settings(d)),
            el("td", str(d["samples"]), class_="num"),
            el("td", str(d["quarantined"]), class_="num bad" if d["quarantined"] else "num"),
            el("td", str(d["guard_failures"]), class_="num"),
            el("td", _last_scan(d["last_scan"])),
            el("td", el("a", "list", href=f"/v1/datasets/{d['name']}/quarantine")),
            id=f"dataset-{d['name']}",
        )
        for d in datasets
    ]
    jobs = [
        el(
            "tr",
            el("td", job["dataset"]),
            el("td", job["id"], class_="muted"),
            el("td", job["mode"]),
            el("td", job["state"], class_="state"),
            el(
                "td",
                el("progress", max=str(job["progress"]["total"] or 1), value=str(job["progress"]["done"])),
                " ",
                el("span", f"{job['progress']['done']} samples", class_="progress-text"),
            ),
            id=f"job-{job['id']}",
            class_="job",
        )
        for job in running
    ]
    body = el(
        "body",
        el("h1", "datalint service"),
        el("h2", "Datasets"),
        el(
            "table",
            el(
                "thead",
                el(
                    "tr",
                    *(
                        el("th", h)
                        for h in (
                            "dataset",
                            "source",
                            "samples",
                            "quarantined",
                            "guard failures",
                            "last scan",
                            "list",
                        )
                    ),
                ),
            ),
            el("tbody", *rows)
            if rows
            else el("tbody", el("tr", el("td", "no datasets registered", colspan="7"))),
            id="datasets",
        ),
        el("h2", "Running scans"),
        el(
            "table",
            el("thead", el("tr", *(el("th", h) for h in ("dataset", "job", "mode", "state", "progress")))),
            el("tbody", *jobs) if jobs else el("tbody", el("tr", el("td", "none", colspan="5"))),
            id="running",
        ),
        el(
            "p",
            f"datalint {version} · ",
            el("a", "metrics", href="/metrics"),
            " · ",
            el("a", "OpenAPI schema", href="/openapi.json"),
            class_="muted",
        ),
        el("script", Html(SCRIPT)),
    )
    head = el(
        "head",
        Html('<meta charset="utf-8">'),
        el("meta", name="viewport", content="width=device-width, initial-scale=1"),
        el("title", "datalint service"),
        el("style", Html(CSS)),
    )
    return "<!DOCTYPE html>\n" + el("html", head, body, lang="en") + "\n"


def render_login(message: str = "", csrf: str = "") -> str:
    head = el(
        "head",
        Html('<meta charset="utf-8">'),
        el("title", "datalint service: sign in"),
        el("style", Html(CSS)),
    )
    form = el(
        "form",
        el("label", "Token ", el("input", type="password", name="token", autocomplete="off", required=True)),
        " ",
        el("input", type="hidden", name="csrf", value=csrf),
        el("button", "Sign in", type="submit"),
        method="post",
        action="/login",
    )
    body = el("body", el("h1", "datalint service"), el("p", message, class_="bad") if message else "", form)
    return "<!DOCTYPE html>\n" + el("html", head, body, lang="en") + "\n"


def _watching(watcher: dict[str, Any] | None) -> Html | str:
    if watcher is None:
        return ""
    if watcher["running"]:
        text = f"watched (pid {watcher['pid']}, restarts {watcher['restarts']})"
    elif watcher.get("paused"):
        text = "watcher paused while a scan runs"
    else:
        text = f"watcher down ({watcher['last_exit']}), restarting"
    return el("span", " · " + text, class_="watcher")


def _settings(dataset: dict[str, Any]) -> Html | str:
    """The scan settings a dataset does not take from the defaults, each with where it is set (the
    whole table is GET /v1/datasets/NAME), or why they cannot be read now."""
    if dataset.get("settings_error"):
        return el("div", f"settings: {dataset['settings_error']}", class_="bad settings")
    from datalint.scan.settings import value_text

    changed = [
        el("span", f"{name} {value_text(setting['value'])}", title=f"from {setting['from']}")
        for name, setting in (dataset.get("settings") or {}).items()
        if setting["from"] != "default"
    ]
    if not changed:
        return ""
    parts: list[Any] = ["settings: "]
    for number, item in enumerate(changed):
        parts.extend([", ", item] if number else [item])
    return el("div", *parts, class_="muted settings")


def _last_scan(run: dict[str, Any] | None) -> Html:
    if run is None:
        return el("span", "never", class_="muted")
    if run.get("finished") is None:
        return el("span", f"started {run['started']} (unfinished)")
    return el("span", f"{run['finished']}")
