package auth

import "testing"

// Only a selector that keeps nothing but the node's own pods lets a node
// list pods: every term is ANDed, so one term naming the node is enough,
// and a negation or another field is not such a term.
func TestSelectsOwnPods(t *testing.T) {
	n1 := Identity{Name: "node:n1", Role: RoleNode, Node: "n1"}
	for sel, want := range map[string]bool{
		"spec.nodeName=n1":                      true,
		"spec.nodeName==n1":                     true,
		" spec.nodeName = n1 ":                  true,
		"status.phase=Running,spec.nodeName=n1": true,
		"spec.nodeName!=n1":                     false,
		"spec.nodeName=n2":                      false,
		"spec.nodeName=n1x":                     false,
		"metadata.name=n1":                      false,
		"":                                      false,
	} {
		if got := SelectsOwnPods(n1, Attributes{Verb: VerbList, Resource: "pods", FieldSelector: sel}); got != want {
			t.Errorf("%q: %v, want %v", sel, got, want)
		}
	}
	if SelectsOwnPods(Identity{Role: RoleClusterAdmin}, Attributes{FieldSelector: "spec.nodeName="}) {
		t.Error("an identity that is no node selected its own pods")
	}
}

func TestMayIssueOnlyWhatItHolds(t *testing.T) {
	admin := Identity{Role: RoleAdmin, Namespace: "a"}
	for _, tc := range []struct {
		id   Identity
		role Role
		ns   string
		want bool
	}{
		{admin, RoleView, "a", true},
		{admin, RoleAdmin, "a", true},
		{admin, RoleView, "b", false},
		{admin, RoleClusterAdmin, "", false},
		{admin, RoleNodeJoin, "", false},
		{Identity{Role: RoleEdit, Namespace: "a"}, RoleView, "a", false},
		{Identity{Role: RoleClusterAdmin}, RoleClusterAdmin, "", true},
		{Identity{Role: RoleNode, Node: "n1"}, RoleView, "a", false},
	} {
		if got := MayIssue(tc.id, tc.role, tc.ns); got != tc.want {
			t.Errorf("%+v issuing %s in %q: %v, want %v", tc.id, tc.role, tc.ns, got, tc.want)
		}
	}
}
