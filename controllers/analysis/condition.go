package analysis

import (
	"errors"
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
)

// Conditions are CEL expressions over one variable, result (a double: the query's
// value), yielding a bool: "result < 0.05", "result >= 0.9 && result <= 1.1". Ints and
// doubles compare with each other ("result < 1" works).
// The environment is built on first use: an operator whose DGDs have no analysis step
// never holds it.
var celEnv = sync.OnceValue(func() *cel.Env {
	env, err := cel.NewEnv(cel.Variable("result", cel.DoubleType), cel.CrossTypeNumericComparisons(true))
	if err != nil {
		panic(err) // a static environment; cannot fail
	}
	return env
})

// programs caches compiled conditions by their text: a DGD's conditions are compiled
// once per operator, not once per measurement.
var programs sync.Map // string -> cel.Program

// CheckCondition reports whether expr is a condition: it compiles, over result
// alone, to a bool.
func CheckCondition(expr string) error {
	_, err := program(expr)
	return err
}

func program(expr string) (cel.Program, error) {
	if p, ok := programs.Load(expr); ok {
		return p.(cel.Program), nil
	}
	ast, iss := celEnv().Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if ast.OutputType() != cel.BoolType {
		return nil, fmt.Errorf("%q yields %s, not a bool", expr, ast.OutputType())
	}
	p, err := celEnv().Program(ast, cel.CostLimit(10000))
	if err != nil {
		return nil, err
	}
	programs.Store(expr, p)
	return p, nil
}

func evalCondition(expr string, v float64) (bool, error) {
	p, err := program(expr)
	if err != nil {
		return false, err
	}
	out, _, err := p.Eval(map[string]any{"result": v})
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, errors.New("the condition did not yield a bool")
	}
	return b, nil
}
