-- Bulk redrive (`recoup.jobs.redrive`): the failed jobs of a tenant that a filter names, counted
-- or listed in the order they failed; each is then redriven by `redrive_job`.

-- _failed_matching --
-- Every filter field NULL when not given (typed, so that a NULL parameter has a type); the
-- prefix and the error taken literally.
tenant = %(tenant)s AND state = 'failed'
  AND (%(job_group)s::text IS NULL OR job_group = %(job_group)s::text)
  AND (%(name_prefix)s::text IS NULL OR starts_with(name, %(name_prefix)s::text))
  AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR finished_at < %(until)s::timestamptz)
  AND (%(error)s::text IS NULL OR strpos(last_error, %(error)s::text) > 0)

-- count_failed_matching --
SELECT count(*) FROM jobs WHERE {_failed_matching}

-- failed_matching_ids --
SELECT id FROM jobs WHERE {_failed_matching} ORDER BY finished_at, id
