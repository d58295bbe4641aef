-- Bulk redrive (`recoup.jobs.redrive`): the failed jobs of a tenant that a filter names, counted
-- or listed in the order they failed; each is then redriven by `redrive_job`.

-- _failed_matching --
-- Every filter field NULL when not given; the prefix and the error taken literally.
tenant = :tenant AND state = 'failed'
  AND (:job_group IS NULL OR job_group = :job_group)
  AND (:name_prefix IS NULL OR substr(name, 1, length(:name_prefix)) = :name_prefix)
  AND (:since IS NULL OR finished_at >= :since)
  AND (:until IS NULL OR finished_at < :until)
  AND (:error IS NULL OR instr(last_error, :error) > 0)

-- count_failed_matching --
SELECT count(*) FROM jobs WHERE {_failed_matching}

-- failed_matching_ids --
SELECT id FROM jobs WHERE {_failed_matching} ORDER BY finished_at, id
