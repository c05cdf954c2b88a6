/*
Copyright 2026 The vgpu-dra Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/
// The page's only script: it keeps the view live without reloading. The
// server sends a "model" event on /events whenever the cluster changed;
// the script then fetches /fragment for the current filter, open nodes and
// Pending pods and swaps it in, keeping the focus and the open/closed state of what
// the user opened or closed. Filters apply as they are typed.
'use strict';
(function () {
  const view = document.getElementById('view');
  const status = document.getElementById('status');
  const form = document.getElementById('filters');
  const openField = document.getElementById('f-open');
  const whyField = document.getElementById('f-why');
  const pendingField = document.getElementById('f-pending');
  // Node, pod, verdict and list sections the user toggled: key -> open.
  const toggled = new Map();
  let shown = view.dataset.version;
  let latest = shown;
  let busy = false;
  let again = false;

  function opened(prefix) {
    const names = [];
    toggled.forEach((open, key) => { if (open && key.startsWith(prefix)) names.push(key.slice(prefix.length)); });
    return names.join(',');
  }

  function query() {
    openField.value = opened('node:');
    whyField.value = opened('pod:');
    pendingField.value = toggled.get('more:pending') ? 'all' : '';
    const params = new URLSearchParams(new FormData(form));
    for (const [k, v] of Array.from(params.entries())) { if (v === '') params.delete(k); }
    return params.toString();
  }

  function keyOf(el) {
    if (el.dataset.node) return 'node:' + el.dataset.node;
    if (el.dataset.pod) return 'pod:' + el.dataset.pod;
    if (el.dataset.more) return 'more:' + el.dataset.more;
    const pod = el.closest('[data-pod]');
    if (pod) return 'verdicts:' + pod.dataset.pod;
    return null;
  }

  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const q = query();
      history.replaceState(null, '', q ? '/?' + q : '/');
      const resp = await fetch('/fragment' + (q ? '?' + q : ''), { cache: 'no-store' });
      if (!resp.ok) throw new Error(resp.status + ' ' + resp.statusText);
      const html = await resp.text();
      const focused = document.activeElement;
      const focusKey = focused && view.contains(focused) && focused.closest('details') ? keyOf(focused.closest('details')) : null;
      view.innerHTML = html;
      view.querySelectorAll('details').forEach((d) => {
        const key = keyOf(d);
        if (key !== null && toggled.has(key)) d.open = toggled.get(key);
      });
      if (focusKey) {
        const target = Array.from(view.querySelectorAll('details')).find((d) => keyOf(d) === focusKey);
        if (target) target.querySelector('summary').focus();
      }
      const frag = document.getElementById('fragment');
      shown = frag ? frag.dataset.version : shown;
      view.dataset.version = shown;
      status.textContent = 'Live: updated ' + new Date().toLocaleTimeString() + '.';
    } catch (err) {
      status.textContent = 'Update failed (' + err.message + '); retrying on the next change.';
    } finally {
      busy = false;
      if (again) { again = false; refresh(); }
    }
  }

  // A toggle event does not bubble: listen in the capture phase.
  view.addEventListener('toggle', (ev) => {
    const d = ev.target;
    const key = keyOf(d);
    if (key === null) return;
    if (toggled.get(key) === d.open) return;
    toggled.set(key, d.open);
    // A collapsed node's GPUs, a pod's explanation and the rest of the
    // Pending pods are fetched when opened.
    if (d.open && d.querySelector(':scope > .lazy')) refresh();
  }, true);

  form.addEventListener('submit', (ev) => { ev.preventDefault(); refresh(); });
  form.addEventListener('change', () => refresh());
  let typing = null;
  form.addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(refresh, 300); });

  const events = new EventSource('/events');
  events.addEventListener('model', (ev) => {
    latest = ev.data;
    if (latest !== shown) refresh();
  });
  events.onerror = () => { status.textContent = 'Connection to kubectl vgpu ui lost; reconnecting…'; };
  events.onopen = () => { status.textContent = 'Live: the page follows the cluster\u2019s watch.'; };
}());
