-- Argo CD action "pause" for nvidia.com/DynamoGraphDeployment: what
-- "kubectl dgd rollout pause" writes, spec.rollout.paused = true.
if obj.spec.rollout == nil then
  obj.spec.rollout = {}
end
obj.spec.rollout.paused = true
return obj
