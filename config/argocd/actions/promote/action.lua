-- Argo CD action "promote" for nvidia.com/DynamoGraphDeployment: what
-- "kubectl dgd rollout promote" writes. Without spec.rollout.steps: spec.rollout.partition
-- 0 and paused false. With steps: the nvidia.com/rollout-promote annotation
-- "<updateRevisionNumber>/<step>" ending the current step (1-based), or
-- "<updateRevisionNumber>/full" ending every remaining one (past the last step), and paused false.
local full = false
local ro = obj.spec.rollout
if ro == nil then
  ro = {}
  obj.spec.rollout = ro
end
if ro.steps == nil or #ro.steps == 0 then
  ro.partition = 0
  ro.paused = false
  return obj
end
local ru = obj.status.rollingUpdate
local step = ru.currentStepIndex
local rev = obj.status.updateRevisionNumber or 0
local value = rev .. "/" .. (step + 1)
if full or step >= #ro.steps then
  value = rev .. "/full"
end
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["nvidia.com/rollout-promote"] = value
ro.paused = false
return obj
