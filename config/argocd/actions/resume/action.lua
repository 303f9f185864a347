-- Argo CD action "resume" for nvidia.com/DynamoGraphDeployment: what
-- "kubectl dgd rollout resume" writes, spec.rollout.paused = false.
if obj.spec.rollout == nil then
  obj.spec.rollout = {}
end
obj.spec.rollout.paused = false
return obj
