package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
)

func TestHTTPHandlerServesProfilesOnlyWhenAsked(t *testing.T) {
	get := func(h http.Handler, path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	var ready atomic.Bool
	off := httpHandler(prometheus.NewRegistry(), &ready, false)
	on := httpHandler(prometheus.NewRegistry(), &ready, true)

	assert.Equal(t, http.StatusNotFound, get(off, "/debug/pprof/"), "profiles are off by default")
	assert.Equal(t, http.StatusNotFound, get(off, "/debug/pprof/heap"))
	assert.Equal(t, http.StatusOK, get(on, "/debug/pprof/"))
	assert.Equal(t, http.StatusOK, get(on, "/debug/pprof/heap"), "named profiles are served by the index handler")
	assert.Equal(t, http.StatusOK, get(on, "/healthz"), "profiling does not hide the other endpoints")
	assert.Equal(t, http.StatusServiceUnavailable, get(on, "/readyz"))
}
