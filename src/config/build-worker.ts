/**
 * The worker thread that validates a large set of rule files (see ./offthread.ts). Its input is
 * the files' text, already read, and the problems of the files that could not be read.
 */
import { serveBuildJob } from './offthread.js';
import { FILES_JOB } from './load.js';

serveBuildJob(FILES_JOB);
