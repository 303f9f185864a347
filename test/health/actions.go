package health

import (
	"fmt"
	"os"
	"path/filepath"

	lua "github.com/yuin/gopher-lua"

	"github.com/dgd-rollout/operator/test/cluster"
)

// Actions are the Argo CD resource actions of config/argocd/actions, in the order the
// patch lists them.
var Actions = []string{"promote", "promote-full", "abort", "retry", "pause", "resume"}

// ActionsDir holds discovery.lua and <action>/action.lua, the layout of Argo CD's own
// resource_customizations/<group>/<kind>/actions.
func ActionsDir() string {
	return filepath.Join(cluster.RepoRoot(), "config", "argocd", "actions")
}

// ReadAction reads action's script ("discovery" reads discovery.lua).
func ReadAction(action string) (string, error) {
	p := filepath.Join(ActionsDir(), action, "action.lua")
	if action == "discovery" {
		p = filepath.Join(ActionsDir(), "discovery.lua")
	}
	b, err := os.ReadFile(p)
	return string(b), err
}

// runAction runs script on obj as Argo CD runs a resource action or its discovery
// (argoproj/argo-cd util/lua/lua.go, VM.runLua: SkipOpenLibs unless UseOpenLibs, then
// only the package, base and table libraries and a safe os; the object as the global
// obj), and returns what it returned.
func runAction(script string, obj map[string]any) (lua.LValue, error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	L.SetGlobal("obj", toLua(L, obj))
	if err := L.DoString(script); err != nil {
		return nil, err
	}
	return L.Get(-1), nil
}

// Discover runs a discovery script: action name to disabled, as Argo CD reads it
// (ExecuteResourceActionDiscovery and isActionDisabled: a missing flag is enabled).
func Discover(script string, obj map[string]any) (map[string]bool, error) {
	ret, err := runAction(script, obj)
	if err != nil {
		return nil, err
	}
	t, ok := ret.(*lua.LTable)
	if !ok {
		return nil, fmt.Errorf("the discovery script returned %s, not a table", ret.Type())
	}
	out := map[string]bool{}
	t.ForEach(func(k, v lua.LValue) {
		disabled := false
		if a, ok := v.(*lua.LTable); ok {
			if b, ok := a.RawGetString("disabled").(lua.LBool); ok {
				disabled = bool(b)
			}
		}
		out[lua.LVAsString(k)] = disabled
	})
	return out, nil
}

// RunAction runs an action script on obj and returns the object it returned, as Argo
// CD decodes it (an old-style action: the modified object), with Argo CD's clean-up of
// an empty table read back as an array where obj had an object (cleanReturnedObj).
func RunAction(script string, obj map[string]any) (map[string]any, error) {
	ret, err := runAction(script, obj)
	if err != nil {
		return nil, err
	}
	m, ok := fromLua(ret).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the action returned %s, not an object", ret.Type())
	}
	return clean(m, obj), nil
}

// fromLua converts a Lua value to JSON-like Go as gopher-json encodes it (a table with
// a sequence part is an array; an empty table is an empty array).
func fromLua(v lua.LValue) any {
	switch x := v.(type) {
	case lua.LBool:
		return bool(x)
	case lua.LNumber:
		f := float64(x)
		if f == float64(int64(f)) {
			return int64(f)
		}
		return f
	case lua.LString:
		return string(x)
	case *lua.LTable:
		if n := x.MaxN(); n > 0 || isEmpty(x) {
			arr := make([]any, 0, n)
			for i := 1; i <= n; i++ {
				arr = append(arr, fromLua(x.RawGetInt(i)))
			}
			return arr
		}
		m := map[string]any{}
		x.ForEach(func(k, e lua.LValue) { m[lua.LVAsString(k)] = fromLua(e) })
		return m
	default:
		return nil
	}
}

func isEmpty(t *lua.LTable) bool {
	k, _ := t.Next(lua.LNil)
	return k == lua.LNil
}

// clean puts back objects of old that came back as empty arrays (Argo CD's
// cleanReturnedObj, which recurses into arrays too).
func clean(m, old map[string]any) map[string]any {
	for k, ov := range old {
		switch nv := m[k].(type) {
		case map[string]any:
			if o, ok := ov.(map[string]any); ok {
				m[k] = clean(nv, o)
			}
		case []any:
			switch o := ov.(type) {
			case map[string]any:
				if len(nv) == 0 {
					m[k] = o
				}
			case []any:
				m[k] = cleanArray(nv, o)
			}
		}
	}
	return m
}

// cleanArray is clean inside arrays (Argo CD's cleanReturnedArray).
func cleanArray(a, old []any) []any {
	for i := range a {
		if i >= len(old) {
			break
		}
		switch nv := a[i].(type) {
		case map[string]any:
			if o, ok := old[i].(map[string]any); ok {
				a[i] = clean(nv, o)
			}
		case []any:
			if o, ok := old[i].([]any); ok {
				a[i] = cleanArray(nv, o)
			}
		}
	}
	return a
}
