package standin

// The HTTP surface: what a kubelet probe, a router and a test see. Handlers only read the
// server's state; run.go owns its changes (loaded, draining).

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"
)

// Server is one stand-in's state, shared by the handlers and the lifecycle.
type Server struct {
	launch    Launch
	argv      []string
	facts     Facts
	startedAt time.Time
	loaded    atomic.Bool
	draining  atomic.Bool
}

// NewServer records the launch and what the process observed about its environment at start.
func NewServer(launch Launch, argv []string, facts Facts, startedAt time.Time) *Server {
	return &Server{launch: launch, argv: argv, facts: facts, startedAt: startedAt}
}

// Handler routes the three endpoints; anything else is the mux's 404 or 405.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /standin", s.describe)
	return mux
}

// ready is what /health reports: loaded, and not shutting down.
func (s *Server) ready() bool { return s.loaded.Load() && !s.draining.Load() }

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	if s.ready() {
		w.WriteHeader(http.StatusOK)
		return
	}
	http.Error(w, "not ready", http.StatusServiceUnavailable)
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "invalid_api_key", "a valid API key is required (Authorization: Bearer <key>)")
		return
	}
	if !s.ready() {
		writeError(w, http.StatusServiceUnavailable, "not_ready", "the model server is loading or shutting down")
		return
	}
	l := s.launch
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id":       l.ServedModelName,
			"object":   "model",
			"created":  s.startedAt.Unix(),
			"owned_by": l.Owner,
			"root":     l.Model,
			"parent":   nil,
			"revision": nullable(l.Revision),
		}},
	})
}

func (s *Server) authorized(r *http.Request) bool {
	if s.launch.APIKey == "" {
		return true
	}
	want := []byte("Bearer " + s.launch.APIKey)
	return subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) == 1
}

// describe reports what the stand-in was started with and where it runs; it never shows the key.
func (s *Server) describe(w http.ResponseWriter, _ *http.Request) {
	l := s.launch
	writeJSON(w, http.StatusOK, map[string]any{
		"form":                   l.Form,
		"argv":                   s.argv,
		"model":                  l.Model,
		"served_model_name":      l.ServedModelName,
		"revision":               nullable(l.Revision),
		"host":                   l.Host,
		"port":                   l.Port,
		"pid":                    s.facts.PID,
		"started_at":             s.startedAt.UTC().Format(time.RFC3339Nano),
		"key_configured":         l.APIKey != "",
		"dev_shm_bytes":          s.facts.DevShmBytes,
		"nvidia_visible_devices": s.facts.NvidiaVisibleDevices,
		"hostname":               s.facts.Hostname,
	})
}

// writeError answers in the shape OpenAI clients parse.
func writeError(w http.ResponseWriter, status int, code, message string) {
	kind := "invalid_request_error"
	if status >= http.StatusInternalServerError {
		kind = "server_error"
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"message": message, "type": kind, "param": nil, "code": code,
	}})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body) // the client hung up; nothing to do
}

func nullable(text string) *string {
	if text == "" {
		return nil
	}
	return &text
}
