package main

import (
	"bytes"
	"os"
	"testing"
)

// TestChartRulesInSync fails when the chart's rules are not what config/rbac gives (a
// marker changed and make manifests was not run, or the chart file was edited by hand).
func TestChartRulesInSync(t *testing.T) {
	want, err := Render("../../config/rbac")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../charts/dgd-rollout/templates/_rbac_rules.tpl")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("charts/dgd-rollout/templates/_rbac_rules.tpl differs from what config/rbac gives: run make manifests")
	}
}
