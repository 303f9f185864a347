// Package health computes what GitOps tools make of a DGD's status: kstatus (Flux,
// kpt, cli-utils) with the real sigs.k8s.io/cli-utils library, and Argo CD by running
// config/argocd/health.lua in gopher-lua, as Argo CD runs a resource customization's
// health script (the object as a Lua table named obj; the script returns a table with
// status and message).
package health

import (
	"fmt"
	"os"
	"path/filepath"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/dgd-rollout/operator/api/v1alpha1"
	"github.com/dgd-rollout/operator/test/cluster"
)

// ScriptPath is the Argo CD health script.
func ScriptPath() string {
	return filepath.Join(cluster.RepoRoot(), "config", "argocd", "health.lua")
}

// toMap is the DGD as the JSON object Argo CD and kstatus read.
func toMap(dgd *v1alpha1.DynamoGraphDeployment) (map[string]any, error) {
	d := dgd.DeepCopy()
	d.APIVersion, d.Kind = v1alpha1.GroupVersion.String(), "DynamoGraphDeployment"
	return runtime.DefaultUnstructuredConverter.ToUnstructured(d)
}

// KStatus is kstatus's verdict: InProgress, Failed, Current...
func KStatus(dgd *v1alpha1.DynamoGraphDeployment) (string, string, error) {
	m, err := toMap(dgd)
	if err != nil {
		return "", "", err
	}
	r, err := status.Compute(&unstructured.Unstructured{Object: m})
	if err != nil {
		return "", "", err
	}
	return r.Status.String(), r.Message, nil
}

// ArgoCD runs the health script on the DGD and returns its status and message.
func ArgoCD(dgd *v1alpha1.DynamoGraphDeployment) (string, string, error) {
	m, err := toMap(dgd)
	if err != nil {
		return "", "", err
	}
	script, err := os.ReadFile(ScriptPath())
	if err != nil {
		return "", "", err
	}
	return Run(string(script), m)
}

// Run runs a health script on obj.
func Run(script string, obj map[string]any) (string, string, error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	// Argo CD opens the base, table, string and math libraries (util/lua).
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		return "", "", err
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("the script returned %s, not a table", L.Get(-1).Type())
	}
	return lua.LVAsString(ret.RawGetString("status")), lua.LVAsString(ret.RawGetString("message")), nil
}

// toLua converts decoded JSON to Lua values as Argo CD does (objects and arrays to
// tables, arrays 1-based, numbers to numbers).
func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(x)
	case string:
		return lua.LString(x)
	case int64:
		return lua.LNumber(x)
	case int32:
		return lua.LNumber(x)
	case int:
		return lua.LNumber(x)
	case float64:
		return lua.LNumber(x)
	case []any:
		t := L.NewTable()
		for _, e := range x {
			t.Append(toLua(L, e))
		}
		return t
	case map[string]any:
		t := L.NewTable()
		for k, e := range x {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	default:
		return lua.LString(fmt.Sprint(x))
	}
}
