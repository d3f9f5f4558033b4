package lockdebug

import (
	"bytes"
	"embed"
	"encoding/json"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"
)

//go:embed assets/page.html assets/live.js assets/style.css
var assets embed.FS

var pageTemplate = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"ms":    formatMS,
	"mode":  modeText,
	"clock": func(t time.Time) string { return t.Format("15:04:05.000") },
	"pct": func(n, total int64) int64 {
		if total <= 0 {
			return 0
		}
		return n * 100 / total
	},
}).ParseFS(assets, "assets/page.html"))

var (
	liveJS   = mustRead("assets/live.js")
	styleCSS = mustRead("assets/style.css")
)

func mustRead(name string) []byte {
	b, err := assets.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return b
}

// contentSecurityPolicy lets the page load its own script and style sheet
// and fetch its own JSON, and nothing else: no inline script, no frame,
// no form.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// ServeHTTP serves the page where it is mounted, with the path ending in
// "/" (mux.Handle("/debug/reqlock/", p)), and beneath it: "json" (the
// Snapshot as JSON), "live.js" (the script that refreshes the page every
// second from "json") and "style.css". It answers GET and HEAD only (405
// otherwise), 404 for any other path, and forbids caching and framing;
// every value on the page is escaped (html/template, and textContent in the
// script).
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "lockdebug: only GET and HEAD are allowed", http.StatusMethodNotAllowed)
		return
	}
	if p.err != nil {
		http.Error(w, "lockdebug: the page was built with invalid options (see Page.Err)", http.StatusInternalServerError)
		return
	}
	var body []byte
	var contentType string
	switch path := r.URL.Path; {
	case path == "" || strings.HasSuffix(path, "/"):
		var buf bytes.Buffer
		if err := pageTemplate.Execute(&buf, p.Snapshot()); err != nil {
			http.Error(w, "lockdebug: the page failed to render", http.StatusInternalServerError)
			return
		}
		body, contentType = buf.Bytes(), "text/html; charset=utf-8"
	case strings.HasSuffix(path, "/json"):
		b, err := json.Marshal(p.Snapshot())
		if err != nil {
			http.Error(w, "lockdebug: the snapshot failed to encode", http.StatusInternalServerError)
			return
		}
		body, contentType = append(b, '\n'), "application/json"
	case strings.HasSuffix(path, "/live.js"):
		body, contentType = liveJS, "text/javascript; charset=utf-8"
	case strings.HasSuffix(path, "/style.css"):
		body, contentType = styleCSS, "text/css; charset=utf-8"
	default:
		http.NotFound(w, r)
		return
	}
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
