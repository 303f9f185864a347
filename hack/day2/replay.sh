#!/usr/bin/env bash
# Replays docs/day2.md against a running `make run` (KUBECONFIG=.local/kubeconfig, the
# plugin on PATH) and prints each command, prefixed with "$ ", and what it printed: the
# transcript the document's blocks are pasted from. It changes the sample DGD
# (vllm-disagg in default): run it on a fresh `make run`.
set -u
run() { echo "\$ $*"; eval "$@" 2>&1; }
img() { # set both workers' image, with the change cause
  echo "kubectl dgd set image vllm-disagg VllmDecodeWorker=nvcr.io/nvidia/ai-dynamo/vllm-runtime:$1 VllmPrefillWorker=nvcr.io/nvidia/ai-dynamo/vllm-runtime:$1 --change-cause=\"vllm-runtime $1\""
}
conditions="kubectl get dgd vllm-disagg -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}{\"\\n\"}{end}'"

echo "## look"
run kubectl get dgd
run kubectl dgd rollout status vllm-disagg
run kubectl dgd rollout history vllm-disagg
run kubectl get deploy,svc

echo "## roll out"
run kubectl apply -f config/samples/disagg-tp2.yaml
run kubectl annotate dgd vllm-disagg kubernetes.io/change-cause=\"decode TP 2\"
run kubectl dgd rollout status vllm-disagg
run kubectl dgd rollout history vllm-disagg
run kubectl dgd rollout history vllm-disagg --revision=2

echo "## frontend"
run kubectl dgd set image vllm-disagg Frontend=nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.1 --change-cause=\"frontend 0.4.1\"
run kubectl dgd rollout status vllm-disagg
run kubectl dgd get vllm-disagg
run kubectl dgd rollout history vllm-disagg
run kubectl get dgd vllm-disagg -o jsonpath="'{.status.updateRevision} {.status.updateWorkerHash}{\"\\n\"}'"

echo "## canary"
run kubectl dgd rollout partition vllm-disagg 50%
run "$(img 0.5.0)"
run kubectl dgd rollout status vllm-disagg
run kubectl get dgd vllm-disagg
run "$conditions"
run kubectl dgd get vllm-disagg
run kubectl dgd rollout promote vllm-disagg
run kubectl dgd rollout status vllm-disagg
run "$conditions"
run kubectl get deploy

echo "## pause"
run "$(img 0.5.1)"
sleep 0.5
run kubectl dgd rollout pause vllm-disagg
run kubectl get deploy
run kubectl dgd rollout status vllm-disagg --watch=false
run kubectl dgd rollout status vllm-disagg --timeout=5s
echo "\$ echo \$?"; kubectl dgd rollout status vllm-disagg --timeout=1s >/dev/null 2>&1; echo $?
run "$conditions"
run kubectl dgd rollout resume vllm-disagg
run kubectl dgd rollout status vllm-disagg

echo "## roll back"
run kubectl dgd rollout history vllm-disagg
run kubectl dgd rollout undo vllm-disagg --dry-run=server
run kubectl dgd rollout undo vllm-disagg
run kubectl dgd rollout status vllm-disagg
run kubectl dgd rollout history vllm-disagg
run kubectl get controllerrevisions -L nvidia.com/dynamo-worker-hash
run kubectl dgd rollout undo vllm-disagg --to-revision=1 --dry-run=client
run kubectl dgd rollout undo vllm-disagg --to-revision=1
run kubectl dgd rollout status vllm-disagg
run kubectl dgd rollout history vllm-disagg
run kubectl get deploy vllm-disagg-frontend -o jsonpath="'{.spec.template.spec.containers[0].image}{\"\\n\"}'"

echo "## errors"
current=$(kubectl get dgd vllm-disagg -o jsonpath='{.status.updateRevisionNumber}')
run kubectl dgd rollout undo vllm-disagg --to-revision="$current"
run kubectl dgd rollout undo vllm-disagg --to-revision=99
run kubectl dgd rollout status nope
run kubectl dgd rollout partition vllm-disagg 150%

echo "## metrics"
run "curl -s 127.0.0.1:8080/metrics | grep '^# HELP dgd_\|^# TYPE dgd_\|^dgd_'"
run "curl -s 127.0.0.1:8080/metrics | grep 'controller_runtime_reconcile_total{controller=\"dynamographdeployment\"'"

echo "## steps"
run kubectl patch dgd vllm-disagg --type=merge -p "'{\"spec\":{\"rollout\":{\"steps\":[{\"partition\":\"75%\"},{\"pause\":{\"duration\":\"20s\"}},{\"partition\":\"25%\"},{\"pause\":{}}]}}}'"
run "$(img 0.6.0)"
run kubectl wait dgd/vllm-disagg --for=jsonpath="'{.status.rollingUpdate.currentStepIndex}'=1" --timeout=60s
run kubectl dgd get vllm-disagg
run kubectl get dgd vllm-disagg -o jsonpath="'{.status.rollingUpdate.message}{\"\\n\"}'"
run kubectl wait dgd/vllm-disagg --for=jsonpath="'{.status.rollingUpdate.currentStepIndex}'=3" --timeout=90s
run kubectl dgd get vllm-disagg
run kubectl dgd rollout status vllm-disagg --watch=false
run "$conditions"
run kubectl dgd rollout promote vllm-disagg
run kubectl dgd rollout status vllm-disagg
run "kubectl get events --field-selector reason=RolloutStepEnded -o custom-columns=REASON:.reason,MESSAGE:.message --sort-by=.metadata.creationTimestamp"
run kubectl dgd rollout partition vllm-disagg 50%

echo "## analysis"
analyses="kubectl get dgd vllm-disagg -o jsonpath='{range .status.rollingUpdate.analyses[*]}steps[{.step}]: {.phase}{\"\\n\"}{range .metrics[*]}  {.name}: {.phase}, successful {.successful}, failed {.failed}, values{range .measurements[*]} {.value}{end}{\"\\n\"}{end}{end}'"
run kubectl apply -f config/samples/analysis/error-rate.yaml
run kubectl patch dgd vllm-disagg --type=merge --patch-file config/samples/canary-analysis.yaml
run "$(img 0.7.0)"
run kubectl wait dgd/vllm-disagg --for=jsonpath="'{.status.rollingUpdate.reason}'=AnalysisRunning" --timeout=60s
run kubectl dgd rollout status vllm-disagg --watch=false
run kubectl dgd rollout status vllm-disagg --timeout=3m
run "$analyses"
run "kubectl get events --field-selector reason=AnalysisSucceeded -o custom-columns=REASON:.reason,MESSAGE:.message --sort-by=.metadata.creationTimestamp"

echo "## abort"
run "$(img 0.7.1-errors)"
run kubectl wait dgd/vllm-disagg --for=jsonpath="'{.status.rollingUpdate.phase}'=Aborted" --timeout=90s
run kubectl dgd get vllm-disagg
run kubectl wait dgd/vllm-disagg --for=condition=Reconciling=False --timeout=90s
run kubectl get dgd vllm-disagg
run kubectl dgd get vllm-disagg
run "$conditions"
run "$analyses"
run kubectl dgd rollout status vllm-disagg
run "kubectl get events --field-selector type=Warning,reason=AnalysisFailed -o custom-columns=REASON:.reason,MESSAGE:.message"
run "kubectl get events --field-selector reason=RolloutAbortCompleted -o custom-columns=REASON:.reason,MESSAGE:.message"

echo "## abort by hand, retry"
run "$(img 0.8.0)"
run kubectl wait dgd/vllm-disagg --for=jsonpath="'{.status.rollingUpdate.reason}'=AnalysisRunning" --timeout=60s
run kubectl dgd rollout abort vllm-disagg
run kubectl wait dgd/vllm-disagg --for=condition=Reconciling=False --timeout=90s
run kubectl get dgd vllm-disagg
run kubectl dgd rollout retry vllm-disagg
run kubectl dgd rollout status vllm-disagg --timeout=3m
run kubectl get dgd vllm-disagg -o jsonpath="'attempt {.status.rollingUpdate.attempt}, {.status.rollingUpdate.phase}{\"\\n\"}'"
run "curl -s 127.0.0.1:8080/metrics | grep '^dgd_analysis_measurements_total'"
