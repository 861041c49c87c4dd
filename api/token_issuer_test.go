package api_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonewright/zonewright/api"
	"github.com/zonewright/zonewright/internal/auth"
)

// A token issued by a token expires with it at the latest, names it as
// its issuer, and is revoked with it, down the whole line: a namespace
// admin cannot leave a 365-day admin token behind when its own is
// revoked. Make Tokens.Revoke revoke only the one token, or drop least()
// from Tokens.issue, to see this fail.
func TestATokenNeverOutlivesTheTokenThatIssuedIt(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	mint := func(by caller, body string) api.IssuedToken {
		t.Helper()
		code, b := a.do(by, "POST", "/api/v1/namespaces/a/tokens", body)
		if code != 201 {
			t.Fatalf("issue %s: %d %s", body, code, b)
		}
		var tok api.IssuedToken
		if err := json.Unmarshal([]byte(b), &tok); err != nil {
			t.Fatal(err)
		}
		return tok
	}
	nsAdmin := mint(caller{bearer: a.admin}, `{"role":"admin","ttlSeconds":600}`)
	child := mint(caller{bearer: nsAdmin.Token}, `{"role":"admin","ttlSeconds":31536000}`)
	if !child.ExpiresAt.After(time.Now()) || child.ExpiresAt.After(nsAdmin.ExpiresAt) {
		t.Errorf("a 365-day token issued by a 10-minute one expires %s; its issuer %s", child.ExpiresAt, nsAdmin.ExpiresAt)
	}
	grandchild := mint(caller{bearer: child.Token}, `{"role":"view"}`)

	var list api.TokenList
	if err := json.Unmarshal([]byte(a.asAdmin("GET", "/api/v1/namespaces/a/tokens", "", 200)), &list); err != nil {
		t.Fatal(err)
	}
	for _, l := range list.Items {
		if l.ID == child.ID && (l.IssuedBy != nsAdmin.ID || l.Issuer != "token:"+nsAdmin.ID) {
			t.Errorf("the child token is listed issued by %q (%q), want token %s", l.IssuedBy, l.Issuer, nsAdmin.ID)
		}
	}

	a.asAdmin("DELETE", "/api/v1/tokens/"+nsAdmin.ID, "", 200)
	for name, tok := range map[string]string{"issuer": nsAdmin.Token, "child": child.Token, "grandchild": grandchild.Token} {
		if code, b := a.do(caller{bearer: tok}, "GET", "/api/v1/namespaces/a/pods", ""); code != 401 {
			t.Errorf("the %s token after its line was revoked: %d %s, want 401", name, code, b)
		}
	}
	// A token revoked mid-line issues nothing more.
	if code, b := a.do(caller{bearer: child.Token}, "POST", "/api/v1/namespaces/a/tokens", `{"role":"view"}`); code != 401 || strings.Contains(b, "zw_") {
		t.Errorf("a revoked token issues a token: %d %s", code, b)
	}
}

// One identity holds a bounded number of live tokens it issued: more
// tokens would be more watch slots, bounded per identity. Drop the count
// in Tokens.issue to see the 101st issued.
func TestAnIssuersLiveTokensAreBounded(t *testing.T) {
	a := newAuthzAPI(t, 0)
	a.seed()
	nsAdmin := caller{bearer: issue(t, a.st, auth.RoleAdmin, "a")}
	// Asked for all at once, and more: the bound holds however the
	// requests interleave. (Make issue count outside its transaction's
	// lock to see more than the bound issued.)
	var last api.IssuedToken
	var mu sync.Mutex
	var wg sync.WaitGroup
	issued, refused := 0, 0
	for range auth.MaxTokensPerIssuer + 20 {
		wg.Go(func() {
			code, b := a.do(nsAdmin, "POST", "/api/v1/namespaces/a/tokens", `{"role":"view"}`)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case code == 201:
				issued++
				_ = json.Unmarshal([]byte(b), &last)
			case code == 403 && strings.Contains(b, "revoke some first"):
				refused++
			default:
				t.Errorf("a token asked for at once: %d %s", code, b)
			}
		})
	}
	wg.Wait()
	if issued != auth.MaxTokensPerIssuer || refused != 20 {
		t.Fatalf("%d issued and %d refused of %d asked at once, want %d and 20", issued, refused, auth.MaxTokensPerIssuer+20, auth.MaxTokensPerIssuer)
	}
	// Another identity is not held back, and a revocation makes room.
	a.asAdmin("POST", "/api/v1/namespaces/a/tokens", `{"role":"view"}`, 201)
	a.asAdmin("DELETE", "/api/v1/tokens/"+last.ID, "", 200)
	if code, b := a.do(nsAdmin, "POST", "/api/v1/namespaces/a/tokens", `{"role":"view"}`); code != 201 {
		t.Fatalf("after a revocation: %d %s", code, b)
	}
}
