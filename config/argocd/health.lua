-- Argo CD health check for nvidia.com/DynamoGraphDeployment (dgd-rollout operator).
-- Install it in argocd-cm under
--   resource.customizations.health.nvidia.com_DynamoGraphDeployment
-- (config/argocd/argocd-cm-patch.yaml carries this file; a test keeps them equal).
-- It reads only the status the operator
-- writes: observedGeneration, the Stalled, Reconciling and Ready conditions and
-- status.rollingUpdate.
local hs = { status = "Progressing", message = "Waiting for the operator to observe the spec" }
if obj.status == nil then
  return hs
end
local gen = obj.metadata.generation
local observed = obj.status.observedGeneration
if gen ~= nil and (observed == nil or observed < gen) then
  return hs
end

local function condition(t)
  if obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == t then
      return c
    end
  end
  return nil
end

local function describe(c)
  local msg = c.reason or ""
  if c.message ~= nil and c.message ~= "" then
    msg = msg .. ": " .. c.message
  end
  return msg
end

local stalled = condition("Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(stalled)
  return hs
end

local ru = obj.status.rollingUpdate
if ru ~= nil and ru.phase == "Paused" then
  -- Held on purpose: spec.rollout.paused, or a partition that keeps some workers on
  -- the old revision until promoted.
  hs.status = "Suspended"
  hs.message = (ru.reason or "Paused") .. ": " .. (ru.message or "")
  return hs
end

local reconciling = condition("Reconciling")
if reconciling ~= nil and reconciling.status == "True" then
  hs.message = describe(reconciling)
  return hs
end

local ready = condition("Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready)
  return hs
end
if ready ~= nil then
  hs.message = describe(ready)
end
return hs
