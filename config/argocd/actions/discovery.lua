-- Argo CD resource actions for nvidia.com/DynamoGraphDeployment (dgd-rollout operator):
-- which of them apply to this DGD now. Each is enabled exactly when the matching
-- "kubectl dgd rollout" verb would write something (the verb errors or prints
-- "already ..." otherwise). Argo CD runs these scripts with the base and table
-- libraries only (util/lua runLua): no string library.
local actions = {}
local ro = obj.spec ~= nil and obj.spec.rollout or nil
local paused = ro ~= nil and ro.paused == true
local steps = 0
if ro ~= nil and ro.steps ~= nil then
  steps = #ro.steps
end
local st = obj.status or {}
local ru = st.rollingUpdate
local observed = (st.observedGeneration or 0) == (obj.metadata.generation or 0)

-- promote, promote-full: without steps, partition 0 and not paused; with steps, end the
-- current step (or every step) through the nvidia.com/rollout-promote annotation.
local canPromote
if steps == 0 then
  local p = ro ~= nil and ro.partition or nil
  canPromote = paused or (p ~= nil and p ~= 0 and p ~= "0%")
else
  canPromote = ru ~= nil and ru.currentStepIndex ~= nil and observed and (ru.currentStepIndex < steps or paused)
end
actions["promote"] = { ["disabled"] = not canPromote }
actions["promote-full"] = { ["disabled"] = not canPromote }

-- abort: a rollout the operator has observed, not aborted yet and not rolled out.
local canAbort = ru ~= nil and observed and ru.abort == nil and ru.phase ~= "Completed"
  and st.currentRevision ~= st.updateRevision
actions["abort"] = { ["disabled"] = not canAbort }

-- retry: an aborted rollout.
actions["retry"] = { ["disabled"] = not (ru ~= nil and ru.abort ~= nil) }

actions["pause"] = { ["disabled"] = paused }
actions["resume"] = { ["disabled"] = not paused }
return actions
