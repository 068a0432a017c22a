/**
 * The worker thread that decodes and validates a large xDS response (see config/offthread.ts).
 * Its input is the response's resources, bytes and type URLs.
 */
import { serveBuildJob } from '../../config/offthread.js';
import { RESOURCES_JOB } from './resources.js';

serveBuildJob(RESOURCES_JOB);
