package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestExpectations(t *testing.T) {
	now := time.Unix(0, 0)
	e := &expectations{now: func() time.Time { return now }}
	k := types.NamespacedName{Namespace: "ns", Name: "w"}
	if !e.satisfied(k, 3) {
		t.Fatal("nothing expected must be satisfied")
	}
	e.expect(k, 4)
	if e.satisfied(k, 3) {
		t.Fatal("a cache still showing 3 after writing 4 is stale")
	}
	if !e.satisfied(k, 4) {
		t.Fatal("the cache shows the write")
	}
	if !e.satisfied(k, 3) {
		t.Fatal("a met expectation is forgotten")
	}
	e.expect(k, 4)
	now = now.Add(expectationTTL)
	if !e.satisfied(k, 7) {
		t.Fatal("someone else wrote 7 over our 4: the expectation expires instead of wedging the DGD")
	}
}
