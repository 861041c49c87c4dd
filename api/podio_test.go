package api_test

import (
	"net/url"
	"strings"
	"testing"
)

// Logs and exec refuse what they cannot serve with a clear Status before
// anything reaches a node; without the cluster CA (plain HTTP) they
// answer 503.
func TestLogsAndExecRefuseBadRequests(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	a.asAdmin("POST", "/api/v1/namespaces/a/pods", `{"metadata":{"name":"unbound"},"spec":{"containers":[{"name":"c","image":"i","command":["c"]}]}}`, 201)
	exec := func(words ...string) string {
		return "/api/v1/namespaces/a/pods/p1/exec?" + url.Values{"command": words, "stdout": {"true"}}.Encode()
	}
	for _, tt := range []struct {
		method, path string
		code         int
		says         string
	}{
		{"GET", "/api/v1/namespaces/a/pods/p1/log?tailLines=-1", 400, "tailLines"},
		{"GET", "/api/v1/namespaces/a/pods/p1/log?follow=sometimes", 400, "follow"},
		{"GET", "/api/v1/namespaces/a/pods/p1/log?sinceSeconds=1&sinceTime=2026-01-01T00:00:00Z", 400, "sinceTime"},
		{"GET", "/api/v1/namespaces/a/pods/p1/log?container=nope", 404, `not found in pod`},
		{"GET", "/api/v1/namespaces/a/pods/nothing/log", 404, "not found"},
		{"GET", "/api/v1/namespaces/a/pods/unbound/log", 400, "has no node yet"},
		{"GET", "/api/v1/namespaces/a/pods/p1/log", 503, "plain HTTP"},
		{"GET", "/api/v1/namespaces/a/pods/p1/exec?stdout=true", 400, "a command is required"},
		{"GET", exec("echo", "a\x00b"), 400, "NUL"},
		{"POST", exec("true") + "&stderr=true&tty=true", 400, "stderr cannot be true with tty"},
		{"GET", exec("true"), 400, "not Running"},
	} {
		code, body := a.do(caller{bearer: a.admin}, tt.method, tt.path, "")
		if code != tt.code || !strings.Contains(body, tt.says) || !strings.Contains(body, `"kind":"Status"`) {
			t.Errorf("%s %s: %d %s, want %d saying %q", tt.method, tt.path, code, body, tt.code, tt.says)
		}
	}
}

// An exec session is a write even when opened with GET: a browser page of
// another origin cannot open one with its visitor's credentials.
func TestExecFromAnotherOriginIsRefused(t *testing.T) {
	c := newAPI(t)
	if r := c.withHeaders("GET", "/api/v1/namespaces/default/pods/web/exec?command=id&stdout=true", nil,
		map[string]string{"Origin": "https://evil.example", "Connection": "Upgrade", "Upgrade": "websocket"}); r.code != 403 || r.status().Kind != "Status" {
		t.Errorf("exec from another origin: %d %s", r.code, r.body)
	}
}
